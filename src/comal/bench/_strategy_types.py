"""What a context strategy of ``comal bench compare`` is given (an imported :class:`Session`)
and what it sends for each model call (:class:`Sent`), apart from the strategies themselves so
that each of them (comal's engines, LangChain's middleware) depends on these alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
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
    # Whether the transcript recorded when its messages were written (the entries keep those
    # times); without them every call is priced as if it followed the previous one at once.
    timed: bool = False
    # The cache lifetime its requests asked for: "1h" when a recorded usage shows 1-hour cache
    # writes, else "5m".
    ttl: str = "5m"

    @property
    def turns(self) -> tuple[int, ...]:
        """Index of each model call: every assistant entry but a leading one."""
        return tuple(
            i for i, e in enumerate(self.entries) if i > 0 and e.role == Role.ASSISTANT.value
        )

    def sent_at(self, index: int) -> float | None:
        """When the model call at ``index`` was sent (seconds): the transcript's time of the
        newest entry before it; None for a transcript without times."""
        if not self.timed or index <= 0:
            return None
        return _seconds(self.entries[index - 1].created_at)


def _seconds(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Sent:
    """What a strategy sent for one model call; ``messages`` is None when it sent nothing."""

    messages: tuple[Message, ...] | None
    error: str | None = None
    # Of the time this request took to make, what a live agent runs off its turn (a deferred
    # compaction's summaries): the harness leaves it out of the assembly time.
    background_ms: float = 0.0


class Strategy(Protocol):
    """``requests`` yields one :class:`Sent` per index in ``session.turns``, in order.

    ``keeps_store``: whether outputs the strategy leaves out stay readable by the model through
    a store (comal's ledger and EvidenceRead); decides whether retention may call them
    recoverable.
    """

    name: str
    keeps_store: bool

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]: ...
