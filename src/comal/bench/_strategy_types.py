"""What a context strategy of ``comal bench compare`` is given (an imported :class:`Session`)
and what it sends for each model call (:class:`Sent`), apart from the strategies themselves so
that each of them (comal's engines, LangChain's middleware) depends on these alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from ..evidence import EvidenceSource
from ..ledger import Entry, Scope
from ..messages import Message, Role
from ..tokens import Budget

__all__ = ["Sent", "Session", "Strategy"]


@dataclass(frozen=True, slots=True)
class Session:
    """One imported session: its entries as stored, the original messages, and the store.

    ``originals`` are the messages as the importer read them from the transcript (same order as
    ``entries``), so retention compares the store against the source, not against itself.
    """

    name: str
    scope: Scope
    entries: tuple[Entry, ...]
    originals: tuple[Message, ...]
    store: EvidenceSource

    @property
    def turns(self) -> tuple[int, ...]:
        """Index of each model call: every assistant entry but a leading one."""
        return tuple(
            i for i, e in enumerate(self.entries) if i > 0 and e.role == Role.ASSISTANT.value
        )


@dataclass(frozen=True, slots=True)
class Sent:
    """What a strategy sent for one model call; ``messages`` is None when it sent nothing."""

    messages: tuple[Message, ...] | None
    error: str | None = None


class Strategy(Protocol):
    """``requests`` yields one :class:`Sent` per index in ``session.turns``, in order.

    ``keeps_store``: whether outputs the strategy leaves out stay readable by the model through
    a store (comal's ledger and EvidenceRead); decides whether retention may call them
    recoverable.
    """

    name: str
    keeps_store: bool

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]: ...
