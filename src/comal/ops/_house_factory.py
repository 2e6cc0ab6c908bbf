"""The one way houses are made (``comal.ops.HouseFactory``): everything a house is but its
session, so every house of a surface is built alike (see :class:`HouseFactory`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ledger import LedgerBackend, Scope
from ._approval import Approver
from ._model import HostSettings
from ._operation import Registry
from ._policy import Policy
from ._workspace import Workspace

if TYPE_CHECKING:
    from ._house import House

__all__ = ["HouseFactory", "Probe"]

Probe = Callable[[str, str], None]


@dataclass(frozen=True, slots=True)
class HouseFactory:
    """Everything a house is made of but its session: every house of a surface is built by one
    factory (:meth:`house`), so a child session's house, the checks' house and the proxy's
    recall house cannot drift from the agent's. The agent layer makes one from the loaded
    configuration (:func:`comal.agent.house_factory`)."""

    ledger: LedgerBackend
    registry: Registry
    policy: Policy
    workspace: Workspace | None = None
    approver: Approver | None = None
    settings: HostSettings | None = None
    probe: Probe | None = None
    protected_paths: tuple[str | Path, ...] = ()
    bwrap: str | None = None
    # ``None``: each house guards its own session's lock (:mod:`._held`); ``unguarded`` opts out.
    guard: Callable[[], None] | None = None
    host: object = None
    # Each plugin's operator settings by section (``plugin_settings:``), read by its handlers
    # through ``CallContext.factory``; the model has no way to change them.
    plugin_settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The operator's command hooks (``hooks:`` / ``hooks_from:``, :mod:`comal.hooks`), run by
    # the built-in ``comal-hooks`` plugin in each house's sandbox.
    hooks: object = None

    def house(self, scope: Scope) -> House:
        from ._house import House  # the house module builds its own factory from this one

        return House(
            self.ledger, scope, self.registry, self.policy, workspace=self.workspace,
            approver=self.approver, settings=self.settings, probe=self.probe,
            protected_paths=self.protected_paths, bwrap=self.bwrap, guard=self.guard,
            host=self.host, plugin_settings=self.plugin_settings, hooks=self.hooks,
        )  # fmt: skip

    def but(self, **changes: Any) -> HouseFactory:
        """This factory with some parts changed (a stricter policy, another registry)."""
        return replace(self, **changes)
