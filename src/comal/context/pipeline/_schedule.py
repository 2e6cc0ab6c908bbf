"""The schedule of one tail: per-entry facts, when every age-based and reactive edit lands, the
cache fence at every point, the history window and the masking switch (see :mod:`._timeline`).

One pass over the tail, priced with the stored token counts and per-entry facts remembered in
the caller's :class:`~comal.context.EngineCache` (keyed by body digest), so a turn costs a scan
of small values, not a re-read of outputs.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...ledger import Entry
from ...messages import Reasoning, Role, Text, ToolCall, group_messages
from .._bound import message_chars
from .._render import EngineCache
from ._config import PipelineConfig
from ._timeline import Aging, Timeline, masking_periods
from ._tools import ResultFacts, result_facts

__all__ = ["Schedule", "build_schedule", "group_starts", "is_user_turn"]


def is_user_turn(entry: Entry) -> bool:
    """A user message with text (tool results are their own role): what starts a user turn."""
    return entry.role == Role.USER.value and any(isinstance(p, Text) for p in entry.message.parts)


def entry_chars(entry: Entry, cache: EngineCache) -> int:
    return cache.facts.get(("pipeline.chars", entry.digest), lambda: message_chars(entry.message))


@dataclass(frozen=True, slots=True)
class Schedule:
    """Everything the layers need to know about the tail, decided from the entries alone."""

    tail: tuple[Entry, ...]
    timeline: Timeline
    facts: Mapping[int, ResultFacts]  # tail index of each tool result
    thinking: Aging  # assistant entries with reasoning blocks
    errors: Aging  # error results
    tier0: Aging  # read-only results (Tier-0)
    mask: Aging  # maskable results, beyond the last K tool uses
    ephemeral: Aging  # ephemeral results, beyond the last K ephemeral ones
    superseded: Mapping[int, tuple[int, int]]  # index -> (point it landed, superseding index)
    fence: Mapping[int, int]  # point -> tail index of its cache fence
    fronts: Mapping[int, int]  # point -> tail index where the kept window starts
    mask_since: int | None  # start of the current masking period (None: masking is off)
    mask_prev: bool  # whether masking was on at the previous point
    chars_now: int
    groups: tuple[int, ...]  # tail index where each group starts (cuts go only there)

    @property
    def now(self) -> int:
        return self.timeline.n

    @property
    def prev(self) -> int | None:
        return self.timeline.prev_point(self.timeline.n)


def _calls(tail: Sequence[Entry]) -> dict[str, ToolCall]:
    out: dict[str, ToolCall] = {}
    for e in tail:
        for call in e.message.tool_calls:
            out[call.id] = call
    return out


def _facts(
    tail: Sequence[Entry], config: PipelineConfig, cache: EngineCache, fingerprint: str
) -> dict[int, ResultFacts]:
    calls = _calls(tail)
    out: dict[int, ResultFacts] = {}
    for i, e in enumerate(tail):
        result = e.message.tool_result
        if result is None:
            continue
        call = calls.get(result.call_id)
        key = (
            "pipeline.result",
            e.digest,
            call.name if call else None,
            call.arguments if call else None,
            fingerprint,
        )

        def make(e: Entry = e, call: ToolCall | None = call) -> ResultFacts:
            return result_facts(e.message, call, config)

        out[i] = cache.facts.get(key, make)
    return out


def group_starts(entries: Sequence[Entry]) -> tuple[int, ...]:
    """Index of the first entry of every group (a message, or an assistant message and the
    results of its calls, LIM-4): the only places the history may be cut."""
    return tuple(g.start for g in group_messages([e.message for e in entries]))


def _window_fronts(
    tail: Sequence[Entry], timeline: Timeline, keep: int, starts_of: Sequence[int]
) -> dict[int, int]:
    """The kept window's first tail index at every point: the group start of the ``keep``-th
    newest user turn once there are more than ``keep`` of them, else the start."""
    users: list[int] = []
    starts: list[int] = []
    for i, e in enumerate(tail):
        if is_user_turn(e):
            users.append(i)
            starts.append(starts_of[bisect_right(starts_of, i) - 1])
    fronts: dict[int, int] = {}
    for p in timeline.points:
        u = bisect_left(users, p)
        fronts[p] = starts[u - keep] if u > keep else 0
    return fronts


def build_schedule(
    tail: Sequence[Entry],
    config: PipelineConfig,
    cache: EngineCache,
    *,
    head_chars: int,
    fingerprint: str,
) -> Schedule:
    tail = tuple(tail)
    assistants = tuple(i for i, e in enumerate(tail) if e.role == Role.ASSISTANT.value)
    timeline = Timeline(len(tail), assistants, config.edit_stride_turns)
    facts = _facts(tail, config, cache, fingerprint)
    results = sorted(facts)
    reasoning = [
        i for i in assistants if any(isinstance(p, Reasoning) for p in tail[i].message.parts)
    ]
    thinking = Aging.by_turns(timeline, reasoning, config.thinking_keep_turns)
    errors = Aging.by_turns(
        timeline,
        [
            i
            for i in results
            if tail[i].message.tool_result.is_error  # type: ignore[union-attr]
            and facts[i].family != "recall"
        ],
        config.eviction_min_age,
    )
    tier0 = Aging.by_count(
        timeline, [i for i in results if facts[i].read_only], config.observation_keep_window
    )
    uses = Aging.by_count(timeline, results, config.observation_keep_window)
    mask_rank = [r for r, i in enumerate(results) if facts[i].maskable and not facts[i].ephemeral]
    mask = Aging(tuple(results[r] for r in mask_rank), tuple(uses.due[r] for r in mask_rank))
    ephemeral = Aging.by_count(
        timeline,
        [i for i in results if facts[i].maskable and facts[i].ephemeral],
        config.ephemeral_keep_window,
    )
    groups = group_starts(tail)
    fronts = _window_fronts(tail, timeline, config.turns_kept, groups)
    # Characters of the history each point sent, before any masking (so masking cannot switch
    # itself off), with the hysteresis gap between switching on and off.
    prefix = [0]
    for e in tail:
        prefix.append(prefix[-1] + entry_chars(e, cache))
    chars_at = [(p, head_chars + prefix[p] - prefix[fronts[p]]) for p in timeline.points]
    active_at = masking_periods(
        chars_at, config.observation_trigger_chars, config.observation_deactivation_chars
    )
    chars = chars_at[-1][1]
    # The fence at every point: the oldest position an age-based edit may still change.
    fence: dict[int, int] = {}
    cursors = [0, 0, 0, 0, 0]
    rules = (thinking, errors, tier0, mask, ephemeral)
    for p in timeline.points:
        positions = []
        for k, rule in enumerate(rules):
            cursors[k], pos = rule.oldest_pending(p, cursors[k])
            if k >= 3 and active_at[p] is None:
                continue  # masking is off: switching it on is an announced rebase
            positions.append(pos)
        fence[p] = max(min(positions, default=p), fronts[p])
    superseded = _superseded(tail, facts, timeline, fence)
    prev = timeline.prev_point(timeline.n)
    return Schedule(
        tail=tail,
        timeline=timeline,
        facts=facts,
        thinking=thinking,
        errors=errors,
        tier0=tier0,
        mask=mask,
        ephemeral=ephemeral,
        superseded=superseded,
        fence=fence,
        fronts=fronts,
        mask_since=active_at[timeline.n],
        mask_prev=prev is not None and active_at[prev] is not None,
        chars_now=chars,
        groups=groups,
    )


def _superseded(
    tail: Sequence[Entry],
    facts: Mapping[int, ResultFacts],
    timeline: Timeline,
    fence: Mapping[int, int],
) -> dict[int, tuple[int, int]]:
    """Results a later one of the same key supersedes, with the point that happened at; only
    while the earlier one was at or above the fence of the assembly before that point."""
    last: dict[tuple[str, str], int] = {}
    out: dict[int, tuple[int, int]] = {}
    for i in sorted(facts):
        f = facts[i]
        if f.key is None or f.family == "recall":
            continue
        before = last.get(f.key)
        last[f.key] = i
        if before is None:
            continue
        landed = timeline.next_point(i)
        prev = timeline.prev_point(landed)
        if prev is None or before >= fence[prev]:
            out[before] = (landed, i)
    return out
