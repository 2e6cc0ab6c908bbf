"""The ten layers, in the SPEC's order (PIP-1, PIP-2, PIP-4), each a pure function
``layer(work, context) -> LayerResult`` with its own metrics.

1. ``thinking``: reasoning blocks outside the last ``thinkingKeepTurns`` model turns go (the
   kept turns keep theirs byte for byte, signatures included).
2. ``reasoning_tags``: ``<think>…</think>`` and its kin leave assistant text; the rest stays.
3. ``history_window``: user turns before the last ``historyTurns`` leave the request.
4. ``evict``: results superseded by a later one (the same file read again, the same command
   run again, the same URL fetched again, a newer image) and errors older than
   ``evictionMinAge`` turns become placeholders.
5. ``mask``: above ``observationTriggerChars`` (until below ``observationDeactivationChars``),
   results beyond the last ``observationKeepWindow`` tool uses (ephemeral ones beyond the last
   ``ephemeralKeepWindow``) become placeholders; never recall results or file reads.
6. ``micro_compact``: Tier-0, every turn: read-only results beyond the last
   ``observationKeepWindow`` read-only uses become placeholders.
7. ``offload``: a result over its inline cap (PIP-3's caps) is sent head + tail; the ledger
   keeps the whole (the write-time guard already did this for results comal ran itself).
8. ``summary``: the stored summary stands between the head and the tail (middle-out).
9. ``restore``: after a summary, the instructions file, the recently accessed files and a
   resume note are re-injected.
10. ``fit``: the request must fit the window: oldest tail steps leave it (an announced cut)
    or the largest messages are bounded; otherwise a coded error.

Layers 4-6 all write placeholders; when two rules apply to one result the one that landed
first wins, so a placeholder the model saw never changes its text.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from ...errors import ContextPressureLoop
from ...messages import Message, Reasoning, Role, Text
from .._assembly import Action, Bounded, ProtectedTailOverflow
from .._bound import bound_message
from .._render import message_tokens
from ._context import Context
from ._forms import offloaded, placeholder, recovery_call, tags_stripped, without_thinking
from ._restore import refold_restore, restore_message
from ._timeline import Aging
from ._work import (
    Cut,
    Edit,
    LayerReport,
    Offloaded,
    Placeholdered,
    Rebased,
    Reread,
    Restored,
    Slot,
    Summarized,
    TagsStripped,
    ThinkingCleared,
    Windowed,
    Work,
    history_tokens,
)

__all__ = ["LAYERS", "LayerResult", "layer_names"]


@dataclass(frozen=True, slots=True)
class LayerResult:
    work: Work
    report: LayerReport
    actions: tuple[Action, ...]


Layer = Callable[[Work, Context], LayerResult]


def _result(
    name: str, before: Work, after: Work, actions: list[Action], *, items: int, new: int = 0
) -> LayerResult:
    """The layer's result; its report's token counts are filled in by the runner, which knows
    the history before the layer (what the one before it left) and prices only a changed
    work, so a turn does not re-add every slot twice per layer."""
    order = LAYER_ORDER.index(name) + 1
    report = LayerReport(name, order, items, -1, -1, new)
    return LayerResult(after if items else before, report, tuple(actions))


def _due_map(rule: Aging) -> dict[int, int]:
    return {i: d for i, d in zip(rule.items, rule.due, strict=True) if d is not None}


# -- 1 ------------------------------------------------------------------------------------------
def clear_thinking(work: Work, ctx: Context) -> LayerResult:
    due = _due_map(ctx.schedule.thinking)
    out: list[Slot] = []
    actions: list[Action] = []
    new = 0
    for slot in work:
        d = due.get(slot.index) if slot.zone == "tail" else None
        if d is None or d > ctx.now or slot.entry is None:
            out.append(slot)
            continue
        blocks = sum(isinstance(p, Reasoning) for p in slot.message.parts)
        priced = without_thinking(slot.entry, ctx.counter, ctx.cache)
        if priced is not None:
            out.append(slot.with_message(priced[0], priced[1], "no-thinking"))
        tokens_after = priced[1] if priced is not None else 0
        fresh = d == ctx.now
        new += fresh
        entry = slot.entry
        actions.append(
            ThinkingCleared(entry.id, entry.seq, blocks, slot.tokens, tokens_after, fresh)
        )
    return _result("thinking", work, tuple(out), actions, items=len(actions), new=new)


# -- 2 ------------------------------------------------------------------------------------------
def strip_tags(work: Work, ctx: Context) -> LayerResult:
    out: list[Slot] = []
    actions: list[Action] = []
    for slot in work:
        entry = slot.entry
        if (
            slot.zone not in ("head", "tail")
            or entry is None
            or slot.message.role is not (Role.ASSISTANT)
        ):
            out.append(slot)
            continue

        def make(slot: Slot = slot) -> tuple[Message, int, int]:
            message, removed = tags_stripped(slot.message)
            tokens = message_tokens(ctx.counter, message) if removed else slot.tokens
            return message, tokens, removed

        key = ("pipeline.tags", entry.id, entry.digest, slot.form, ctx.counter.name)
        message, tokens, removed = ctx.cache.references.get(key, make)
        if not removed:
            out.append(slot)
            continue
        out.append(slot.with_message(message, tokens, f"{slot.form}+tags"))
        actions.append(TagsStripped(entry.id, entry.seq, removed))
    return _result("reasoning_tags", work, tuple(out), actions, items=len(actions))


# -- 3 ------------------------------------------------------------------------------------------
def history_window(work: Work, ctx: Context) -> LayerResult:
    front = ctx.schedule.fronts[ctx.now]
    dropped = [s for s in work if s.zone == "tail" and s.index < front]
    kept = tuple(s for s in work if not (s.zone == "tail" and s.index < front))
    actions: list[Action] = []
    if dropped:
        seqs = [s.entry.seq for s in dropped if s.entry is not None]
        tokens = sum(s.tokens for s in dropped)
        actions.append(Windowed(min(seqs), max(seqs), len(dropped), tokens))
    return _result("history_window", work, kept, actions, items=len(dropped))


# -- 4, 5, 6: placeholders ----------------------------------------------------------------------
def _placeholders(
    name: str, work: Work, ctx: Context, decisions: Mapping[int, tuple[int, str]]
) -> LayerResult:
    """Apply ``decisions`` (tail index -> (landed at, reason)) where no earlier one holds."""
    rank = LAYER_ORDER.index(name) + 1
    out = list(work)
    where = {s.index: k for k, s in enumerate(work) if s.zone == "tail"}
    actions: list[Action] = []
    new = 0
    for index in sorted(decisions):
        k = where.get(index)
        if k is None:
            continue  # left out by the history window
        slot = work[k]
        entry = slot.entry
        if entry is None or entry.message.tool_result is None:
            continue
        due, reason = decisions[index]
        if slot.edit is not None and slot.edit.due <= due:
            continue  # an earlier placeholder stays exactly as the model saw it
        facts = ctx.schedule.facts[index]
        message, tokens, call = placeholder(
            entry, facts, reason, ctx.counter, ctx.cache, ctx.config.preview_chars
        )
        if tokens >= entry.tokens:
            continue  # too small to be worth a placeholder (a pure function of it)
        out[k] = replace(slot, message=message, tokens=tokens, edit=Edit(due, rank, reason))
        fresh = due == ctx.now
        new += fresh
        result = entry.message.tool_result
        done = Placeholdered(
            entry.id, entry.seq, result.call_id, name, reason, entry.tokens, tokens, due,
            fresh, call,
        )  # fmt: skip
        actions.append(done)
    return _result(name, work, tuple(out), actions, items=len(actions), new=new)


_SUPERSEDED = MappingProxyType(
    {
        "file": "superseded by a later read of the same file",
        "command": "superseded by a later run of the same command",
        "url": "superseded by a later fetch of the same URL",
        "search": "superseded by a later run of the same search",
        "image": "superseded by a newer image",
    }
)


def evict(work: Work, ctx: Context) -> LayerResult:
    sch = ctx.schedule
    decisions: dict[int, tuple[int, str]] = {}
    min_age = ctx.config.eviction_min_age
    for i, d in _due_map(sch.errors).items():
        if d <= ctx.now:
            decisions[i] = (d, f"(an error) evicted after {min_age} turns")
    rereads: list[Action] = []
    for i, (d, later) in sch.superseded.items():
        if d > ctx.now:
            continue
        kind = sch.facts[i].key[0] if sch.facts[i].key else "image"  # type: ignore[index]
        if i not in decisions or d < decisions[i][0]:
            decisions[i] = (d, _SUPERSEDED.get(kind, "superseded by a later result"))
        tail = sch.tail
        rereads.append(
            Reread(tail[later].id, tail[later].seq, tail[i].id, f"{kind}:{sch.facts[i].what}")
        )
    done = _placeholders("evict", work, ctx, decisions)
    return replace(done, actions=done.actions + tuple(rereads))


def _masked(rule: Aging, since: int, now: int, reason: str) -> dict[int, tuple[int, str]]:
    out: dict[int, tuple[int, str]] = {}
    for i, d in _due_map(rule).items():
        landed = max(d, since)
        if landed <= now:
            out[i] = (landed, reason)
    return out


def mask(work: Work, ctx: Context) -> LayerResult:
    sch, config = ctx.schedule, ctx.config
    if sch.mask_since is None:
        return _result("mask", work, work, [], items=0)
    decisions = _masked(
        sch.mask,
        sch.mask_since,
        ctx.now,
        f"masked: older than the last {config.observation_keep_window} tool uses",
    )
    decisions |= _masked(
        sch.ephemeral,
        sch.mask_since,
        ctx.now,
        f"masked: older than the last {config.ephemeral_keep_window} web results",
    )
    return _placeholders("mask", work, ctx, decisions)


def micro_compact(work: Work, ctx: Context) -> LayerResult:
    keep = ctx.config.observation_keep_window
    reason = f"cleared by micro-compaction: older than the last {keep} read-only tool uses"
    decisions = {i: (d, reason) for i, d in _due_map(ctx.schedule.tier0).items() if d <= ctx.now}
    return _placeholders("micro_compact", work, ctx, decisions)


# -- 7 ------------------------------------------------------------------------------------------
def offload(work: Work, ctx: Context) -> LayerResult:
    out: list[Slot] = []
    actions: list[Action] = []
    config = ctx.config
    for slot in work:
        entry = slot.entry
        if (
            slot.zone not in ("head", "tail")
            or entry is None
            or entry.message.tool_result is None
            or slot.edit is not None
        ):
            out.append(slot)
            continue
        facts = ctx.schedule.facts.get(slot.index) if slot.zone == "tail" else None
        if facts is None and slot.zone == "head":
            facts = ctx.head_facts.get(entry.id)
        large = facts is not None and facts.large_cap
        cap = config.large_inline_chars if large else config.inline_chars
        bounded = offloaded(entry, cap, ctx.counter, ctx.cache)
        if bounded is None or bounded.tokens >= slot.tokens:
            out.append(slot)
            continue
        out.append(slot.with_message(bounded.message, bounded.tokens, "offloaded"))
        actions.append(
            Offloaded(entry.id, entry.seq, slot.tokens, bounded.tokens, recovery_call(entry))
        )
    return _result("offload", work, tuple(out), actions, items=len(actions))


# -- 8 ------------------------------------------------------------------------------------------
def _after_zones(work: Work, zones: tuple[str, ...]) -> int:
    """Index just after the last slot in ``zones`` (or after system/pinned when none)."""
    at = 0
    for k, slot in enumerate(work):
        if slot.zone in ("system", "pinned", *zones):
            at = k + 1
    return at


def summary(work: Work, ctx: Context) -> LayerResult:
    base = ctx.base
    if base is None:
        return _result("summary", work, work, [], items=0)
    tokens = ctx.cache.references.get(
        ("pipeline.base", base.id, base.digest, ctx.counter.name),
        lambda: message_tokens(ctx.counter, base.message),
    )
    slot = Slot(base.message, tokens, "summary")
    at = _after_zones(work, ("head",))
    after = (*work[:at], slot, *work[at:])
    stored = ctx.summary
    if stored is not None:
        level, by, made_at = stored.level, stored.summarizer, stored.made_at_seq
    else:
        level, by, made_at = "checkpoint", str(base.meta.get("engine", "another engine")), -1
    fresh = stored is not None and not any(
        e.role == Role.ASSISTANT.value and e.seq >= made_at for e in ctx.tail
    )
    action = Summarized(base.first_seq, base.last_seq, tokens, level, by, len(ctx.head), fresh)
    return _result("summary", work, after, [action], items=1, new=int(fresh))


# -- 9 ------------------------------------------------------------------------------------------
def restore(work: Work, ctx: Context) -> LayerResult:
    stored = ctx.summary
    if stored is None:
        return _result("restore", work, work, [], items=0)
    config = ctx.config

    def make() -> tuple[Message, int, int]:
        message, chars = restore_message(stored, config)
        return message, message_tokens(ctx.counter, message), chars

    key = (
        "pipeline.restore",
        stored.record.id,
        stored.record.digest,
        config.instructions_source,
        config.instructions,
        config.instructions_max_chars,
        config.restore_recent_files,
        ctx.counter.name,
    )
    message, tokens, chars = ctx.cache.references.get(key, make)
    at = _after_zones(work, ("head", "summary"))
    after = (*work[:at], Slot(message, tokens, "restore"), *work[at:])
    files = min(len(stored.restore.files), config.restore_recent_files)
    action = Restored(tokens, chars, files, stored.restore.request is not None)
    return _result("restore", work, after, [action], items=1)


# -- 10 -----------------------------------------------------------------------------------------
def _steps(work: Work, ctx: Context) -> list[list[int]]:
    """Work indices of the tail slots, grouped by step (LIM-4 groups), oldest first."""
    groups: list[list[int]] = []
    last: int | None = None
    starts = ctx.schedule.groups
    for k, slot in enumerate(work):
        if slot.zone != "tail" or slot.entry is None:
            continue
        group = bisect_right(starts, slot.index) - 1
        if group != last:
            groups.append([])
            last = group
        groups[-1].append(k)
    return groups


def _cut(work: Work, ctx: Context, room: int) -> tuple[Work, list[Action]]:
    """Leave out the oldest tail steps until the history is at or under ``target``; never the
    newest step, never the step of the newest user turn."""
    target = int(ctx.config.fit_target_ratio * room)
    steps = _steps(work, ctx)
    if len(steps) < 2:
        return work, []
    user_steps = [n for n, g in enumerate(steps) if any(_is_user(work[k]) for k in g)]
    protected = {len(steps) - 1, *user_steps[-1:]}
    total = history_tokens(work)
    drop: set[int] = set()
    for n, group in enumerate(steps):
        if total <= target:
            break
        if n in protected:
            continue
        drop.update(group)
        total -= sum(work[k].tokens for k in group)
    if not drop:
        return work, []
    seqs = [work[k].entry.seq for k in drop if work[k].entry is not None]  # type: ignore[union-attr]
    before = history_tokens(work)
    kept = tuple(s for k, s in enumerate(work) if k not in drop)
    cut = Cut(min(seqs), max(seqs), len(drop), before, history_tokens(kept))
    return kept, [cut]


def _is_user(slot: Slot) -> bool:
    return slot.message.role is Role.USER and any(isinstance(p, Text) for p in slot.message.parts)


def _squeeze(work: Work, ctx: Context, room: int) -> tuple[Work, list[Action]]:
    """Bound the largest tail messages head + tail until the history fits ``room``."""
    fixed = history_tokens(work) - sum(s.tokens for s in work if s.zone == "tail")
    tail = [k for k, s in enumerate(work) if s.zone == "tail" and s.entry is not None]
    left = room - fixed
    sizes = sorted(work[k].tokens for k in tail)
    cap = max(sizes, default=0)
    for n, size in enumerate(sizes):
        share = left // max(len(sizes) - n, 1)
        if size > share:
            cap = share
            break
        left -= size
    out = list(work)
    actions: list[Action] = []
    for _ in range(4):
        actions = []
        for k in tail:
            slot = work[k]
            entry = slot.entry
            assert entry is not None
            if slot.tokens <= cap or cap < 64:
                out[k] = slot
                continue
            bounded = bound_message(entry, cap, 100_000, ctx.counter, ctx.cache)
            if bounded.tokens >= slot.tokens:
                out[k] = slot
                continue
            out[k] = slot.with_message(bounded.message, bounded.tokens, "bounded")
            bound = Bounded(entry.id, entry.seq, slot.tokens, bounded.tokens, bounded.fields)
            actions.append(bound)
        if history_tokens(tuple(out)) <= room:
            break
        cap = int(cap * 0.8)
    return tuple(out), actions


def fit(work: Work, ctx: Context) -> LayerResult:
    room = ctx.budget.history_capacity
    if history_tokens(work) <= room:
        return _result("fit", work, work, [], items=0)
    fixed = sum(s.tokens for s in work if s.zone not in ("system", "tail"))
    if fixed >= room:
        raise ProtectedTailOverflow(
            f"CONTEXT_PRESSURE_LOOP: the pinned entries, head, summary and restored context "
            f"take {fixed:,} history tokens, over the {room:,} the window leaves; nothing in "
            "the tail can make room for them. Lower compactionPrefixAnchorTurns or "
            "prefix_anchor_max_ratio, shorten the instructions, or use a larger window."
        )
    after, actions = _cut(work, ctx, room)
    after = refold_restore(work, after, ctx.summary, ctx)
    if history_tokens(after) > room:
        after, bounds = _squeeze(after, ctx, room)
        actions += bounds
    if history_tokens(after) > room:
        raise ContextPressureLoop(
            f"CONTEXT_PRESSURE_LOOP: even with the oldest steps left out and the largest "
            f"messages bounded the history needs {history_tokens(after):,} tokens, over the "
            f"{room:,} the window leaves. The ledger keeps everything; use a larger window or "
            "fewer tools."
        )
    stable = _after_zones(work, ("head", "summary", "restore"))
    actions.append(Rebased("cut", stable))
    return _result("fit", work, after, actions, items=len(actions) - 1)


LAYERS: tuple[tuple[str, Layer], ...] = (
    ("thinking", clear_thinking),
    ("reasoning_tags", strip_tags),
    ("history_window", history_window),
    ("evict", evict),
    ("mask", mask),
    ("micro_compact", micro_compact),
    ("offload", offload),
    ("summary", summary),
    ("restore", restore),
    ("fit", fit),
)
LAYER_ORDER: tuple[str, ...] = tuple(name for name, _ in LAYERS)


def layer_names() -> tuple[str, ...]:
    return LAYER_ORDER
