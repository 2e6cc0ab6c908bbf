"""A prepared turn, and the one recorder of what its request cost (OBS-1).

:meth:`ContextSession.prepare <comal.turns.ContextSession.prepare>` returns a :class:`Turn`:
the view, the budget, the assembly and what was stored for it, with the request record's fields
the service owns. A surface sends the assembly its own way, then records the request through
:meth:`Turn.usage` (the reply's :class:`~comal.ledger.UsageInput`, appended with the reply) or
:meth:`ContextSession.record_request` (a request with no entry: a failure, an interruption, a
reply that was not kept).

**One owner per field.** The fields of :data:`SERVICE_FIELDS` are the service's — where the
request's prompt ends, the window, the stage, what was sent, the engine's metrics — and a
surface's own fields (the agent's anchor key and estimate, the proxy's route and digest, a
framework's name) are added beside them: a surface that gives one of the service's fields is a
:class:`~comal.errors.UserError` at once, never a silent second writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..context import Assembly, View
from ..errors import UserError
from ..ledger import CheckpointRecord, UsageInput
from ..tokens import Budget, Usage

if TYPE_CHECKING:
    from ._service import ContextSession

__all__ = ["SERVICE_FIELDS", "Turn", "TurnFieldOwned", "unassembled_usage"]

# The request record's fields :meth:`ContextSession.meta` writes (OBS-1).
SERVICE_FIELDS = frozenset(
    {
        "engine",
        "prompt_last_seq",
        "stage",
        "window",
        "input_limit",
        "threshold",
        "fixed_tokens",
        "history_tokens",
        "input_tokens",
        "session_tokens",
        "sent_seqs",
        "referenced",
        "bounded",
        "checkpoint",
        "checkpoint_new",
        "metrics",
    }
)


class TurnFieldOwned(UserError):
    """A surface gave a request-record field the turn service owns."""

    code = "TURN_FIELD_OWNED"


def _own(fields: Mapping[str, Any]) -> None:
    owned = SERVICE_FIELDS.intersection(fields)
    if owned:
        raise TurnFieldOwned(
            f"the request record's field(s) {', '.join(sorted(owned))} belong to the turn "
            "service (ContextSession.meta); a surface adds only fields of its own"
        )


@dataclass(frozen=True)
class Turn:
    """One prepared request of a session: what :meth:`ContextSession.prepare` did for it.

    ``at`` is the seq the next entry takes (the reply's, when it is appended); ``since`` the
    last seq the previous request carried; ``stored`` the checkpoint the assembly proposed,
    as committed (``None``: none, or a preview); ``maintained`` the stand-ins the maintenance
    before it stored; ``meta`` the request record's fields the service owns."""

    view: View
    budget: Budget
    assembly: Assembly
    since: int
    stored: CheckpointRecord | None
    maintained: tuple[object, ...]
    meta: Mapping[str, Any]
    committed: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    service: ContextSession | None = field(default=None, compare=False, repr=False)

    @property
    def at(self) -> int:
        return self.view.end_seq

    def add(self, fields: Mapping[str, Any]) -> None:
        """Fields of the surface's own for every record of this turn (checked against the
        service's)."""
        _own(fields)
        self.extra.update(fields)

    def record_meta(self, fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The meta of one request record of this turn: the service's fields, the surface's
        for the turn (:meth:`add`), then ``fields``, this record's own."""
        if not fields:
            return {**self.meta, **self.extra}
        _own(fields)
        return {**self.meta, **self.extra, **fields}

    def usage(
        self,
        usage: Usage,
        *,
        model: str | None = None,
        protocol: str | None = None,
        fields: Mapping[str, Any] | None = None,
    ) -> UsageInput:
        """The request record of this turn's reply, to append with it (the one shape every
        surface records, OBS-1)."""
        return UsageInput(usage, model=model, protocol=protocol, meta=self.record_meta(fields))

    def record(
        self,
        usage: Usage,
        *,
        model: str | None = None,
        protocol: str | None = None,
        fields: Mapping[str, Any] | None = None,
        entry_id: int | None = None,
    ) -> None:
        """Record this turn's request with no reply appended (a failure, an interruption, a
        reply that was not kept), or anchored to ``entry_id``: through its service."""
        made = self.usage(usage, model=model, protocol=protocol, fields=fields)
        self.record_usage(made, entry_id=entry_id)

    def record_usage(self, made: UsageInput, *, entry_id: int | None = None) -> None:
        """Record ``made`` (built by :meth:`usage`) as this turn's request, through its
        service."""
        if self.service is None:
            raise UserError("this turn was not prepared by a turn service: it cannot record")
        self.service.record(made, entry_id=entry_id)


def unassembled_usage(
    usage: Usage,
    *,
    model: str | None = None,
    protocol: str | None = None,
    fields: Mapping[str, Any] | None = None,
) -> UsageInput:
    """The request record of a reply comal did not assemble the request for (a framework
    that called its model with its own history): the surface's fields, marked so."""
    own = dict(fields or {})
    _own(own)
    return UsageInput(usage, model=model, protocol=protocol, meta=own | {"assembled": False})
