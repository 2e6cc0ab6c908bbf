"""The default engine, "memory to the limit" (LIM-1..6): :func:`assemble`.

1. TOK-5: instructions and tool schemas must leave room for history, or nothing is sent.
2. LIM-1: at or under the threshold, the latest checkpoint and every newer message verbatim
   (a message too large for the window alone is bounded head + tail, LIM-4).
3. LIM-2: over it, the oldest large tool results become exact references until the history is
   at or under the target (:mod:`._stage_refs`; sticky by construction, no state needed).
4. LIM-3: still over the threshold, whole steps from the start become a deterministic checkpoint
   (:mod:`._checkpoint`), keeping the newest steps that fit the target; the caller stores it.
5. LIM-4/5: when the protected tail (the newest step and the K newest results) keeps the
   history over the threshold even after the derivation, the tail is bounded head + tail down
   to the target; if even that cannot fit the window, :class:`ProtectedTailOverflow` is raised.
   A derivation that frees less than ``pressure_min_saving`` of the history, or that only fits
   thanks to such bounds, counts toward a streak; the ``pressure_loop_n``-th in a row raises
   CONTEXT_PRESSURE_LOOP instead of deriving again. No path loops.

No I/O happens here: the view was read before, and the proposal is stored after.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from itertools import pairwise

from ...errors import ContextPressureLoop
from ...messages import Message, Reasoning
from ...tokens import REPLY_PRIMING, Budget, TokenCounter
from .._assembly import (
    Action,
    Assembly,
    Bounded,
    Checkpointed,
    CheckpointProposal,
    MediaReferenced,
    Metrics,
    ProtectedTailOverflow,
    Referenced,
    utilization,
)
from .._bound import bound_message
from .._render import EngineCache, media_in, message_tokens, strip_media
from .._view import View
from ._checkpoint import derive_checkpoint, previous_streak
from ._config import EngineConfig, Limits
from ._stage_refs import Form, Item, build_items, replay
from ._state import EngineState

__all__ = ["assemble"]

# The smallest per-message cap a squeezed tail may use: below it a marker costs more than the
# head and tail it frames.
_MIN_SQUEEZE = 64


@dataclass(slots=True)
class _Tail:
    items: list[Item]
    base: Message | None  # the checkpoint message in front of the items
    base_tokens: int
    history: int
    squeezed: dict[int, tuple[Message, int, Bounded]]
    proposal: CheckpointProposal | None = None
    derived: int = 0  # history after the derivation, before any bounding of the tail
    evicted: int = 0
    thinking: int = 0


def _level(sizes: list[int], room: int) -> int:
    """The largest cap ``c`` with ``sum(min(size, c)) <= room`` (water-filling)."""
    left = room
    ordered = sorted(sizes)
    for k, size in enumerate(ordered):
        share = left // (len(ordered) - k)
        if size > share:
            return share
        left -= size
    return max(ordered, default=0)


def _squeeze(tail: _Tail, room: int, config: EngineConfig, counter: TokenCounter) -> int:
    """Bound the tail's largest messages until its items fit ``room``; return their tokens."""
    preview = config.preview_chars
    sizes = [it.current(counter, preview)[1] for it in tail.items]
    cap = _level(sizes, room)
    total = sum(sizes)
    while total > room and cap >= _MIN_SQUEEZE:
        tail.squeezed.clear()
        total = 0
        for i, (item, size) in enumerate(zip(tail.items, sizes, strict=True)):
            if size <= cap or item.form is Form.REFERENCE:
                total += size
                continue
            result = bound_message(
                item.entry, cap, config.max_single_message_chars, counter, item.cache
            )
            message, tokens = result.message, result.tokens
            if item.form is Form.NO_MEDIA and media_in(message):
                message = strip_media(message, item.entry.id)
                tokens = message_tokens(counter, message)
            if tokens >= size:
                total += size  # too short for a marker to save anything: sent as it is
                continue
            action = Bounded(
                item.entry.id, item.entry.seq, item.entry.tokens, tokens, result.fields
            )
            tail.squeezed[i] = (message, tokens, action)
            total += tokens
        # Markers and bounding slack can leave the total a little over: lower the cap by the
        # excess spread over the bounded messages and try again.
        cap -= max(1, (total - room) // max(len(tail.squeezed), 1))
    return total


def _stage2(
    view: View,
    items: list[Item],
    limits: Limits,
    config: EngineConfig,
    counter: TokenCounter,
    pinned: int,
) -> _Tail:
    starts = [i for i, it in enumerate(items) if i == 0 or it.group != items[i - 1].group]
    bounds = list(pairwise([*starts, len(items)]))
    sizes = [sum(it.tokens for it in items[s:e]) for s, e in bounds]
    results = [i for i, it in enumerate(items) if it.is_result]
    keep = config.keep_recent_results
    oldest = results[max(len(results) - keep, 0)] if results else len(items) - 1
    protected = min(items[oldest].group, len(starts) - 1)
    room = limits.target - limits.checkpoint_reserve - pinned - REPLY_PRIMING
    if config.yield_protected_to_checkpoint:
        # The K newest results are never referenced one by one, but when they alone overflow
        # the target, a cut that keeps them all frees nothing and the run would stop with
        # CONTEXT_PRESSURE_LOOP. The checkpoint may then cover the older of them: their bytes
        # stay exact in the ledger and the checkpoint references them. The newest step stays.
        while protected < len(starts) - 1 and sum(sizes[protected:]) > room:
            protected += 1
    cut, kept = protected, sum(sizes[protected:])
    while cut > 0 and kept + sizes[cut - 1] <= room:
        cut -= 1
        kept += sizes[cut]
    cut = min(max(cut, 1), protected)  # cover at least one step when any may be covered
    base = view.checkpoint.message if view.checkpoint is not None else None
    base_tokens = message_tokens(counter, base) if base is not None else 0
    tail = _Tail(items[starts[cut] :] if starts else [], base, base_tokens, 0, {})
    if cut > 0:
        covered = items[: starts[cut]]
        groups = [[it.entry for it in items[s:e]] for s, e in bounds[:cut]]
        tail.proposal = derive_checkpoint(
            view.checkpoint, groups, config, counter, limits.checkpoint_reserve, {}
        )
        tail.base, tail.base_tokens = tail.proposal.message, tail.proposal.tokens
        tail.evicted = sum(it.current(counter, config.preview_chars)[1] for it in covered)
        tail.thinking = sum(
            isinstance(p, Reasoning) for it in covered for p in it.entry.message.parts
        )
    # Decide the tail's forms from scratch, exactly as the next turn will once the checkpoint
    # is stored: the proposal's assembly and the next one agree byte for byte.
    offset = starts[cut] if starts else 0
    rep = replay(tail.items, pinned + tail.base_tokens, limits, config, counter, offset=offset)
    tail.history = tail.derived = rep.history
    fixed_part = pinned + tail.base_tokens + REPLY_PRIMING
    if tail.history > limits.threshold:
        # The protected tail alone is over the threshold: bound it down to the target. The next
        # turn meets the same tail over the threshold and bounds it the same way.
        tail.history = fixed_part + _squeeze(tail, limits.target - fixed_part, config, counter)
    if tail.history > limits.capacity:
        raise ProtectedTailOverflow(
            f"CONTEXT_PRESSURE_LOOP: the newest step and the {keep} newest tool results need "
            f"{tail.history:,} history tokens even bounded head + tail, over the "
            f"{limits.capacity:,} the window leaves. The work is kept in the ledger. Lower "
            "keep_recent_results, shorten the instructions or tool schemas, or use a model "
            "with a larger window."
        )
    return tail


def _pressure(before: int, after: int, limits: Limits, config: EngineConfig, streak: int) -> int:
    """LIM-5: the streak after this derivation; raises on the ``pressure_loop_n``-th poor one.

    ``after`` is the history the derivation itself reached, before the protected tail was
    bounded: bounds are recomputed every turn, so a derivation that only fits because of them
    will be needed again on the next turn, and the one after (lossless-claw #268).
    """
    saved = before - after
    poor = saved < config.pressure_min_saving * before or after > limits.threshold
    if not poor:
        return 0
    streak += 1
    if streak >= config.pressure_loop_n:
        raise ContextPressureLoop(
            f"CONTEXT_PRESSURE_LOOP: {streak} derivations in a row each freed too little: this "
            f"one freed {saved:,} of {before:,} history tokens ({saved / max(before, 1):.0%}, "
            f"{config.pressure_min_saving:.0%} needed) and left {after:,} against a threshold "
            f"of {limits.threshold:,}. The engine stopped instead of deriving again; nothing is "
            "lost, the ledger keeps the whole session. Start a new session from the latest "
            "checkpoint, lower keep_recent_results, or use a model with a larger window."
        )
    return streak


def _actions(items: list[Item], tail: _Tail, counter: TokenCounter, preview: int) -> list[Action]:
    out: list[Action] = []
    for i, item in enumerate(items):
        entry = item.entry
        if i in tail.squeezed:
            out.append(tail.squeezed[i][2])
        elif item.form is Form.REFERENCE:
            _, tokens, ref = item.ref(counter, preview)
            out.append(Referenced(entry.id, entry.seq, entry.tokens, tokens, ref, item.decided_at))
        else:
            if item.bounded is not None:
                fields = item.bounded.fields
                out.append(Bounded(entry.id, entry.seq, entry.tokens, item.tokens, fields))
            if item.form is Form.NO_MEDIA:
                _, tokens = item.plain(counter)
                images = len(media_in(item.message))
                out.append(
                    MediaReferenced(
                        entry.id, entry.seq, images, item.tokens, tokens, item.decided_at
                    )
                )
    return out


def assemble(
    view: View,
    budget: Budget,
    config: EngineConfig | None = None,
    *,
    state: object = None,
    cache: EngineCache | None = None,
) -> Assembly:
    """The active memory for the next request; see the module docstring.

    ``state`` is the previous assembly's ``next_state``; without it the LIM-5 streak is read
    from the view's checkpoint. ``cache`` is the caller's :class:`EngineCache` (a fresh one
    when not given: the same bytes, only slower). Raises
    :class:`~comal.errors.ContextOverhead` (TOK-5), :class:`~comal.errors.ContextPressureLoop`
    or :class:`ProtectedTailOverflow` (LIM-5).
    """
    started = time.perf_counter()
    budget.check_overhead()
    config = config if config is not None else EngineConfig()
    counter = config.token_counter
    limits = Limits.of(budget, config)
    cache = cache if cache is not None else EngineCache()
    if isinstance(state, EngineState):
        streak = state.low_saving_streak
    else:
        streak = previous_streak(view.checkpoint)
    preview = config.preview_chars
    pinned = sum(e.tokens for e in view.pinned)
    items = build_items(view.entries, config, limits, counter, cache)
    base = view.checkpoint.message if view.checkpoint is not None else None
    base_tokens = message_tokens(counter, base) if base is not None else 0
    before = replay(items, pinned + base_tokens, limits, config, counter).history
    tail = _Tail(items, base, base_tokens, before, {})
    if before > limits.threshold and items:
        tail = _stage2(view, items, limits, config, counter, pinned)
        streak = _pressure(before, tail.derived, limits, config, streak)
        if tail.proposal is not None:
            meta = {"low_saving_streak": streak, "tokens_before": before}
            meta |= {"tokens_after": tail.history, "window": budget.window}
            tail.proposal = replace(tail.proposal, meta={**tail.proposal.meta, **meta})
    elif before > limits.capacity:
        raise ProtectedTailOverflow(
            f"CONTEXT_PRESSURE_LOOP: the pinned system entries and checkpoint take {before:,} "
            f"history tokens, over the {limits.capacity:,} the window leaves; nothing can be "
            "derived from them. Shorten them or use a model with a larger window."
        )
    messages: list[Message] = [*view.system, *(e.message for e in view.pinned)]
    ids: list[int | None] = [None] * len(view.system) + [e.id for e in view.pinned]
    if tail.base is not None:
        messages.append(tail.base)
        ids.append(None)
    for i, item in enumerate(tail.items):
        squeezed = tail.squeezed.get(i)
        messages.append(squeezed[0] if squeezed else item.current(counter, preview)[0])
        ids.append(item.entry.id)
    actions = _actions(tail.items, tail, counter, preview)
    if tail.proposal is not None:
        p = tail.proposal
        covered = len(items) - len(tail.items)
        actions.append(Checkpointed(p.first_seq, p.last_seq, covered, before, tail.history))
    metrics, breakdown = _report(view, budget, limits, items, tail, actions, before, streak)
    return Assembly(
        messages=tuple(messages),
        entry_ids=tuple(ids),
        history_tokens=tail.history,
        breakdown=breakdown,
        actions=tuple(actions),
        metrics=replace(metrics, duration_ms=(time.perf_counter() - started) * 1000),
        checkpoint_to_store=tail.proposal,
        next_state=EngineState(streak),
    )


def _report(
    view: View,
    budget: Budget,
    limits: Limits,
    items: list[Item],
    tail: _Tail,
    actions: list[Action],
    before: int,
    streak: int,
) -> tuple[Metrics, dict[str, int | float | str | None]]:
    """OBS-1 metrics and the ``/context`` breakdown of one assembly."""
    masked = sum(
        a.tokens_before - a.tokens_after
        for a in actions
        if isinstance(a, (Referenced, MediaReferenced, Bounded))
    )
    thinking = tail.thinking + sum(
        it.bounded.reasoning_dropped for it in tail.items if it.bounded is not None
    )
    kinds = {type(a) for a in actions if not isinstance(a, Checkpointed)}
    stage = "verbatim"
    # A checkpoint derived now or one that still stands in for older history: either way what
    # is sent is not the whole history, and the stage says so (the proxy's x-comal-stage).
    if tail.proposal is not None or tail.base is not None:
        stage = "checkpoint"
    elif Referenced in kinds:
        stage = "references"
    if tail.squeezed:
        stage += "+bounded-tail"
    loaded = budget.fixed + tail.history
    metrics = Metrics(
        tokens_loaded=loaded,
        tokens_evicted=tail.evicted,
        tokens_masked=masked,
        tokens_compacted=tail.base_tokens,
        thinking_blocks_removed=thinking,
        budget_utilization=utilization(loaded, budget.input_limit),
        session_depth=view.end_seq,
        session_tool_results=sum(it.is_result for it in items),
        layer_count=len(kinds) + (1 if tail.base is not None else 0),
    )
    breakdown: dict[str, int | float | str | None] = {
        **budget.breakdown(),
        "stage": stage,
        "history_tokens": tail.history,
        "total_input_tokens": loaded,
        "history_threshold": limits.threshold,
        "history_target": limits.target,
        "checkpoint_reserve": limits.checkpoint_reserve,
        "media_reserve": limits.media_reserve,
        "single_message_bound": limits.single_bound,
        "pinned_tokens": sum(e.tokens for e in view.pinned),
        "checkpoint_tokens": tail.base_tokens,
        "entries_sent": len(tail.items),
        "tokens_before_derivation": before,
        "low_saving_streak": streak,
    }
    return metrics, breakdown
