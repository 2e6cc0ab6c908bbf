"""What a run of requests would cost with prompt caching, measured one way for every strategy.

The measure (docs/bench.md repeats it with a worked example):

1. A request is cut into *wire units* in the order providers cache a prompt: the system prompt,
   then each Anthropic message. A run of tool messages and the user message right after them are
   one unit, because :func:`~comal.messages.wire.to_anthropic` sends them as one user message.
   The transcripts carry no tool schemas, so there is no tools unit.
2. A unit's *bytes* are the canonical JSON of its Anthropic form; its *tokens* are
   :func:`~comal.tokens.count_message` of its canonical messages with the one counter (engine
   parts priced as the text they render to, which is what a provider receives). A request's
   tokens are the sum over its units plus :data:`~comal.tokens.REPLY_PRIMING`.
3. The *cached prefix* of a request is measured against the previous request of the same run:
   the tokens of every leading unit whose bytes equal the unit at the same position before, plus,
   for the first unit that differs, its tokens times the share of its bytes that the two
   encodings have in common from the start (rounded down). The rest of the request is uncached.
4. The cache expires: when the time since the previous request of the run is over the cache's
   lifetime (:data:`TTL_SECONDS`: 5 minutes, or 1 hour for a session whose requests asked
   for the 1-hour cache), nothing is cached and the whole request is written again. A
   request's time is the transcript's time of the newest entry it carries (the agent sent it
   right after); where the transcript recorded no times, or either of the two requests has
   none, the cache is taken as warm, as if each call followed the previous one at once.
5. Each provider's reference table (:func:`comal.tokens.load_prices`: the data in
   ``comal/tokens/prices.json`` that the agent prices its measured usage with too) prices the
   cached part at its cache-read rate and the rest at its cache-write rate (the 1-hour rate
   for a 1-hour cache), or at the base input rate where the provider charges no write
   premium.

Simplifications, the same for every strategy: every request is assumed to mark a cache
breakpoint at its end (so everything uncached is written), every provider's cache lives as
long as Anthropic's (OpenAI documents 5 to 10 minutes of inactivity, Gemini's implicit cache
no lifetime), and there is no minimum cacheable length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..messages import (
    Checkpoint,
    EvidenceRef,
    Message,
    Part,
    Role,
    Summary,
    Text,
    canonical_json,
    message_to_dict,
)
from ..messages.wire import render_engine_part, to_anthropic
from ..tokens import REPLY_PRIMING, PriceTable, TokenCounter, count_message, load_prices

__all__ = [
    "PROVIDERS",
    "TTL_SECONDS",
    "CostMeter",
    "PriceTable",
    "Pricer",
    "RequestCost",
    "Unit",
    "cached_prefix",
    "common_prefix",
    "load_prices",
    "wire_groups",
]

PROVIDERS = ("anthropic", "openai", "gemini")
# How long a cached prefix lives after its last use, by the cache lifetime a request asked for.
TTL_SECONDS = {"5m": 300.0, "1h": 3_600.0}
_SYSTEM = (Role.SYSTEM, Role.DEVELOPER)
_ENGINE_PARTS = (EvidenceRef, Summary, Checkpoint)


@dataclass(frozen=True, slots=True)
class Unit:
    """One wire unit of a request: its canonical bytes and its tokens."""

    data: bytes
    tokens: int


def wire_groups(messages: Sequence[Message]) -> list[tuple[Message, ...]]:
    """The messages of each wire unit, grouped as :func:`to_anthropic` sends them."""
    groups: list[tuple[Message, ...]] = []
    i, n = 0, len(messages)
    while i < n:
        role = messages[i].role
        j = i + 1
        if role in _SYSTEM and not groups:
            while j < n and messages[j].role in _SYSTEM:
                j += 1
        elif role is Role.TOOL:
            while j < n and messages[j].role is Role.TOOL:
                j += 1
            if j < n and messages[j].role is Role.USER:
                j += 1
        groups.append(tuple(messages[i:j]))
        i = j
    return groups


def _rendered(message: Message) -> Message:
    """The message as a provider receives it: engine parts become their rendered text."""
    if not any(isinstance(p, _ENGINE_PARTS) for p in message.parts):
        return message
    parts: list[Part] = [
        Text(render_engine_part(p)) if isinstance(p, _ENGINE_PARTS) else p for p in message.parts
    ]
    return Message(message.role, tuple(parts), message.name)


class Pricer:
    """Prices requests with one counter.

    Units are remembered by their messages: from one turn to the next a strategy resends mostly
    the same message values, so each distinct unit is encoded and counted once per session.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._units: dict[tuple[Message, ...], Unit] = {}
        self._tokens: dict[Message, int] = {}

    def message_tokens(self, message: Message) -> int:
        tokens = self._tokens.get(message)
        if tokens is None:
            tokens = count_message(self.counter, _rendered(message))
            self._tokens[message] = tokens
        return tokens

    def unit(self, group: tuple[Message, ...]) -> Unit:
        unit = self._units.get(group)
        if unit is None:
            unit = Unit(_encode(group), sum(self.message_tokens(m) for m in group))
            self._units[group] = unit
        return unit

    def units(self, messages: Sequence[Message]) -> tuple[Unit, ...]:
        return tuple(self.unit(g) for g in wire_groups(messages))

    @staticmethod
    def request_tokens(units: Sequence[Unit]) -> int:
        return REPLY_PRIMING + sum(u.tokens for u in units)

    def clear(self) -> None:
        """Forget every unit (between sessions, to bound memory)."""
        self._units.clear()
        self._tokens.clear()


def _encode(group: tuple[Message, ...]) -> bytes:
    try:
        wire: Any = to_anthropic(group)
    except UserError:
        # Content Anthropic cannot carry (a system message mid-run, media without a source)
        # still needs deterministic bytes; the canonical message bodies are those.
        wire = [message_to_dict(m) for m in group]
    return canonical_json(wire).encode()


def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b``.

    Binary search over slice comparisons: each is a memcmp of bytes (memoryview comparison is
    slower, it goes element by element), so a 100 KB unit takes ~17 of them instead of a Python
    loop over every byte.
    """
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def cached_prefix(previous: Sequence[Unit], current: Sequence[Unit]) -> int:
    """Tokens of ``current`` that repeat the start of ``previous`` byte for byte (step 3)."""
    cached = 0
    for before, now in zip(previous, current, strict=False):
        if before.data == now.data:
            cached += now.tokens
            continue
        if now.data:
            cached += now.tokens * common_prefix(before.data, now.data) // len(now.data)
        break
    return cached


@dataclass(frozen=True, slots=True)
class RequestCost:
    """One request: its tokens, how many were cache reads, dollars with caching and without,
    and whether it found the cache expired (``cold``)."""

    tokens: int
    cached: int
    usd: dict[str, float]
    uncached_usd: dict[str, float]
    cold: bool = False


@dataclass(slots=True)
class CostMeter:
    """Prices the requests of one run in order; each is compared with the one before it, and
    finds nothing cached when more than the cache's lifetime (``ttl``) passed since it."""

    tables: dict[str, PriceTable]
    ttl: str = "5m"
    previous: tuple[Unit, ...] = ()
    previous_at: float | None = None
    tokens: int = 0
    cached: int = 0
    cold: int = 0
    usd: dict[str, float] = field(default_factory=dict)

    def expired(self, at: float | None) -> bool:
        """Whether a request at ``at`` (seconds) finds the previous one's cache gone."""
        if at is None or self.previous_at is None or not self.previous:
            return False
        return at - self.previous_at > TTL_SECONDS[self.ttl]

    def add(self, units: tuple[Unit, ...], at: float | None = None) -> RequestCost:
        total = Pricer.request_tokens(units)
        cold = self.expired(at)
        cached = 0 if cold else min(cached_prefix(self.previous, units), total)
        usd = {p: _cost(t, cached, total, self.ttl) for p, t in self.tables.items()}
        plain = {p: t.uncached(total) for p, t in self.tables.items()}
        self.previous = units
        self.previous_at = at
        self.tokens += total
        self.cached += cached
        self.cold += cold
        for p, v in usd.items():
            self.usd[p] = self.usd.get(p, 0.0) + v
        return RequestCost(total, cached, usd, plain, cold)

    @property
    def hit(self) -> float:
        """Share of all input tokens that were cache reads."""
        return self.cached / self.tokens if self.tokens else 0.0


def _cost(table: PriceTable, cached: int, total: int, ttl: str) -> float:
    """Dollars for ``total`` prompt tokens of which ``cached`` were read and the rest written
    with a ``ttl`` lifetime."""
    _, read, write = table.rates(total, ttl)
    return (cached * read + (total - cached) * write) / table.per_tokens
