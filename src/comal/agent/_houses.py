"""The one house factory: every house a surface builds, from the loaded configuration.

The agent's house, a child session's, the checks', the proxy's recall house and the HTTP API's
are all made by :func:`house_factory` (and :meth:`~comal.ops.House.factory` for a sibling of a
house that exists): the policy from the configuration (modes, rules, limits, the sandbox) with
the configuration file itself guarded from the model (CFG-2), the workspace, the approver, the
host's live settings and controls, the operator's command hooks (``hooks``, ``hooks_from``:
:mod:`comal.hooks`), and the guard that lets calls with effects run only while
the process holds the session's lock (RES-2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..ledger import LedgerBackend
from ..ops import Approver, HostSettings, HouseFactory, Probe, Registry, Rule, Workspace
from ._config import Config, config_path, policy_from_config
from ._config_hooks import house_hooks, protect_hooks_files

__all__ = ["house_factory"]


def house_factory(
    ledger: LedgerBackend,
    config: Config,
    registry: Registry,
    *,
    workspace: Workspace | None = None,
    approver: Approver | None = None,
    settings: HostSettings | None = None,
    rules: Sequence[Rule] = (),
    guard: Callable[[], None] | None = None,
    host: object = None,
    probe: Probe | None = None,
    protect: Path | None = None,
) -> HouseFactory:
    """The factory of the houses of one surface. ``rules`` are the ones a human added during
    this process ("always allow"), after the configuration's; ``protect`` is the configuration
    file to guard (default: the one :func:`config_path` names)."""
    policy = policy_from_config(
        config, workspace=workspace, protect=protect if protect is not None else config_path()
    )
    hooks = house_hooks(config.hooks, config.hooks_from, workspace)
    return HouseFactory(
        ledger,
        registry,
        policy.with_rules(*protect_hooks_files(hooks, workspace), *rules),
        workspace=workspace,
        approver=approver,
        settings=settings,
        probe=probe,
        guard=guard,
        host=host,
        plugin_settings=config.plugin_settings,
        hooks=hooks,
    )
