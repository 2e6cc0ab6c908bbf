"""Whether a request keeps tool calls and their results together.

Providers reject a request in which a tool result has no call before it (an *orphan*), and
Anthropic also rejects a call whose result does not follow. A strategy *splits* a pair when the
history it was given held both halves and its request carries only one of them. Pairs that were
already broken in the original transcript (an interrupted call, an orphan the importer kept) are
not the strategy's doing and are not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..messages import Message, orphan_results

__all__ = ["PairCheck", "PairLedger"]


@dataclass(frozen=True, slots=True)
class PairCheck:
    split: int  # pairs whole in the history, half present in the request
    orphans: int  # results in the request whose call does not come before them


@dataclass(slots=True)
class PairLedger:
    """The whole pairs of a growing history; :meth:`extend` it to each call's prefix."""

    calls: set[str] = field(default_factory=set)
    results: set[str] = field(default_factory=set)
    seen: int = 0

    def extend(self, history: Sequence[Message]) -> None:
        for message in history[self.seen :]:
            self.calls.update(c.id for c in message.tool_calls)
            result = message.tool_result
            if result is not None and result.call_id in self.calls:
                self.results.add(result.call_id)
        self.seen = len(history)

    def check(self, request: Sequence[Message]) -> PairCheck:
        calls: set[str] = set()
        results: set[str] = set()
        for message in request:
            calls.update(c.id for c in message.tool_calls)
            result = message.tool_result
            if result is not None:
                results.add(result.call_id)
        whole = self.results  # a result is only recorded here once its call came before it
        split = len((calls ^ results) & whole)
        orphans = sum(1 for r in orphan_results(request) if r.call_id in whole)
        return PairCheck(split, orphans)
