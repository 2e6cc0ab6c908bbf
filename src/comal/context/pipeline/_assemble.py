"""Running the layers: :func:`assemble` (every turn) and :func:`plan_summary` (after a turn).

The view is cut into zones: the instructions, the pinned system entries, the *head* (the
first user turns, never edited: the cache prefix every summary keeps), the stored summary and
the restored context when there is one, and the *tail* the layers edit. The layers run in
order over the work; then the assembly says where its cache fence is (the leading messages
the next request will repeat byte for byte unless it announces a rebase) and which edits are
new this turn.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ...ledger import Entry
from ...messages import Role, Text, ToolCall
from ...tokens import REPLY_PRIMING, Budget
from .._assembly import Action, Assembly, Metrics, utilization
from .._render import EngineCache
from .._task import TaskState
from .._view import View
from ._config import PipelineConfig
from ._context import Context
from ._forms import recovery_call
from ._layers import LAYERS
from ._schedule import build_schedule, entry_chars, is_user_turn
from ._summary import (
    FileRef,
    PipelineSummarize,
    RestoreData,
    StoredSummary,
    head_end,
    quote_request,
)
from ._tools import ResultFacts, result_facts
from ._work import (
    Cut,
    LayerReport,
    Placeholdered,
    Rebased,
    Slot,
    Summarized,
    ThinkingCleared,
    Windowed,
    Work,
    history_tokens,
)

__all__ = ["Run", "assemble", "plan_summary", "run_layers"]

_REQUEST_QUOTE_CHARS = 4_000


@dataclass(frozen=True, slots=True)
class Run:
    """The layers' output: the work, each layer's report, what they did, and the context."""

    work: Work
    reports: tuple[LayerReport, ...]
    actions: tuple[Action, ...]
    context: Context


def _head_facts(
    head: Sequence[Entry], config: PipelineConfig, cache: EngineCache, fingerprint: str
) -> dict[int, ResultFacts]:
    calls: dict[str, ToolCall] = {c.id: c for e in head for c in e.message.tool_calls}
    out: dict[int, ResultFacts] = {}
    for e in head:
        result = e.message.tool_result
        if result is None:
            continue
        call = calls.get(result.call_id)

        def make(e: Entry = e, call: ToolCall | None = call) -> ResultFacts:
            return result_facts(e.message, call, config)

        key = ("pipeline.head", e.id, e.digest, call.arguments if call else None, fingerprint)
        out[e.id] = cache.facts.get(key, make)
    return out


def _context(view: View, budget: Budget, config: PipelineConfig, cache: EngineCache) -> Context:
    base = view.checkpoint
    stored = StoredSummary.of(base)
    if base is None:
        cap = math.floor(config.prefix_anchor_max_ratio * max(budget.history_capacity, 0))
        h = head_end(view.entries, config.compaction_prefix_anchor_turns, cap)
        head, tail = view.entries[:h], view.entries[h:]
    elif stored is not None:
        head, tail = view.head, view.entries
    else:
        head, tail = (), view.entries
    fingerprint = config.model_dump_json(exclude={"counter", "instructions"})
    head_chars = sum(entry_chars(e, cache) for e in (*view.pinned, *head))
    schedule = build_schedule(tail, config, cache, head_chars=head_chars, fingerprint=fingerprint)
    return Context(
        view=view,
        budget=budget,
        config=config,
        counter=config.token_counter,
        cache=cache,
        head=tuple(head),
        head_facts=_head_facts(head, config, cache, fingerprint),
        schedule=schedule,
        base=base,
        summary=stored,
    )


def run_layers(
    view: View,
    budget: Budget,
    config: PipelineConfig,
    cache: EngineCache,
    *,
    until: str | None = None,
) -> Run:
    """Run the layers in order (up to and including ``until``, all when None)."""
    ctx = _context(view, budget, config, cache)
    work: Work = (
        *(Slot(m, 0, "system") for m in view.system),
        *(Slot(e.message, e.tokens, "pinned", e) for e in view.pinned),
        *(Slot(e.message, e.tokens, "head", e) for e in ctx.head),
        *(Slot(e.message, e.tokens, "tail", e, i) for i, e in enumerate(ctx.tail)),
    )
    reports: list[LayerReport] = []
    actions: list[Action] = []
    tokens = history_tokens(work)
    for name, layer in LAYERS:
        done = layer(work, ctx)
        after = tokens if done.work is work else history_tokens(done.work)
        work = done.work
        reports.append(replace(done.report, tokens_before=tokens, tokens_after=after))
        tokens = after
        actions += done.actions
        if name == until:
            break
    return Run(work, tuple(reports), tuple(actions), ctx)


def _stable_after(work: Work, zones: tuple[str, ...]) -> int:
    at = 0
    for k, slot in enumerate(work):
        if slot.zone in ("system", "pinned", *zones):
            at = k + 1
    return at


def _rebases(run: Run) -> list[Rebased]:
    """The deliberate edits below the previous fence this turn (announced, never silent)."""
    ctx, work = run.context, run.work
    sch = ctx.schedule
    out: list[Rebased] = []
    if any(isinstance(a, Summarized) and a.new for a in run.actions):
        out.append(Rebased("summary", _stable_after(work, ("head",))))
    prev = sch.prev
    stable = _stable_after(work, ("head", "summary", "restore"))
    if prev is not None and not out:
        if sch.fronts[prev] != sch.fronts[sch.now]:
            out.append(Rebased("window", stable))
        if (sch.mask_since is not None) != sch.mask_prev:
            out.append(Rebased("mask on" if sch.mask_since is not None else "mask off", stable))
    return out


def _fence(run: Run, rebases: Sequence[Rebased]) -> int:
    """The cache fence as a message index: the leading messages that stay byte-identical in
    the next request unless it announces a rebase."""
    if any(r.reason == "cut" for r in rebases):
        return min(r.stable_messages for r in rebases)
    ctx = run.context
    fence = ctx.schedule.fence[ctx.now]
    for k, slot in enumerate(run.work):
        if slot.zone == "tail" and slot.index >= fence:
            return k
    return len(run.work)


def assemble(
    view: View,
    budget: Budget,
    config: PipelineConfig,
    *,
    cache: EngineCache | None = None,
) -> Assembly:
    started = time.perf_counter()
    budget.check_overhead()
    cache = cache if cache is not None else EngineCache()
    run = run_layers(view, budget, config, cache)
    rebases = [*_rebases(run), *(a for a in run.actions if isinstance(a, Rebased))]
    fence = _fence(run, rebases)
    work = run.work
    history = history_tokens(work) + REPLY_PRIMING
    actions = (*run.reports, *(a for a in run.actions if not isinstance(a, Rebased)), *rebases)
    metrics, breakdown = _report(run, budget, history, fence, rebases)
    return Assembly(
        messages=tuple(s.message for s in work),
        entry_ids=tuple(s.entry.id if s.entry is not None else None for s in work),
        history_tokens=history,
        breakdown=breakdown,
        actions=actions,
        metrics=replace(metrics, duration_ms=(time.perf_counter() - started) * 1000),
        checkpoint_to_store=None,
    )


def _report(
    run: Run, budget: Budget, history: int, fence: int, rebases: Sequence[Rebased]
) -> tuple[Metrics, dict[str, int | float | str | None]]:
    ctx, work, acts = run.context, run.work, run.actions
    by_layer = {r.layer: r for r in run.reports}

    def saved(*names: str) -> int:
        return sum(
            max(by_layer[n].tokens_before - by_layer[n].tokens_after, 0)
            for n in names
            if n in by_layer
        )

    cut = sum(a.tokens_before - a.tokens_after for a in acts if isinstance(a, Cut))
    summary_tokens = sum(s.tokens for s in work if s.zone == "summary")
    loaded = budget.fixed + history
    view = ctx.view
    results = sum(e.message.tool_result is not None for e in (*ctx.head, *ctx.tail))
    metrics = Metrics(
        tokens_loaded=loaded,
        tokens_evicted=saved("history_window", "evict") + cut,
        tokens_masked=saved("mask", "micro_compact", "offload"),
        tokens_compacted=summary_tokens,
        thinking_blocks_removed=sum(a.blocks for a in acts if isinstance(a, ThinkingCleared)),
        budget_utilization=utilization(loaded, budget.input_limit),
        session_depth=view.end_seq,
        session_tool_results=results,
        layer_count=sum(1 for r in run.reports if r.acted),
    )
    sch = ctx.schedule
    fence_seq = next((s.entry.seq for s in work[fence:] if s.entry is not None), view.end_seq)
    breakdown: dict[str, int | float | str | None] = {
        **budget.breakdown(),
        "engine": "pipeline",
        "stage": "summary" if ctx.base is not None else "layers",
        "history_tokens": history,
        "total_input_tokens": loaded,
        "cache_fence": fence,
        "cache_fence_seq": fence_seq,
        "rebased": ",".join(r.reason for r in rebases) or None,
        "head_entries": len(ctx.head),
        "tail_entries": len(ctx.tail),
        "window_front_seq": ctx.tail[sch.fronts[sch.now]].seq
        if sch.fronts[sch.now] < len(ctx.tail)
        else None,
        "masking": "on" if sch.mask_since is not None else "off",
        "history_chars": sch.chars_now,
        "placeholders_new": sum(1 for a in acts if isinstance(a, Placeholdered) and a.new),
        "windowed_entries": sum(a.entries for a in acts if isinstance(a, Windowed)),
        "reread_count": sum(1 for a in acts if type(a).__name__ == "Reread"),
        "layer_count": metrics.layer_count,
    }
    for r in run.reports:
        breakdown[f"layer{r.order:02d}.{r.layer}"] = r.items
    return metrics, breakdown


# -- planning the summary (layer 8, PIP-1 / PIP-4) ---------------------------------------------
def _turns_since(view: View, stored: StoredSummary | None) -> int:
    if stored is None:
        return 1 << 30
    return sum(
        1 for e in view.entries if e.role == Role.ASSISTANT.value and e.seq >= stored.made_at_seq
    )


def _restore_data(
    middle: Sequence[Entry],
    run: Run,
    stored: StoredSummary | None,
    quote: Entry | None,
) -> RestoreData:
    ctx = run.context
    facts = ctx.schedule.facts
    index = {e.id: i for i, e in enumerate(ctx.tail)}
    files: dict[str, FileRef] = {}
    reads: dict[str, str] = {}
    for e in middle:
        f = facts.get(index.get(e.id, -1))
        if f is None or not f.what or f.family not in ("read", "edit"):
            continue
        if f.family == "read":
            reads[f.what] = recovery_call(e)
        files.pop(f.what, None)
        files[f.what] = FileRef(f.what, f.family, e.seq, reads.get(f.what))
    newest = list(reversed(files.values()))
    if stored is not None:
        seen = {f.path for f in newest}
        newest += [f for f in stored.restore.files if f.path not in seen]
    last = next((e for e in reversed(middle) if e.role == Role.ASSISTANT.value), None)
    action = ""
    if last is not None:
        text = " ".join(p.text for p in last.message.parts if isinstance(p, Text)).strip()
        calls = "; ".join(f"{c.name}({c.arguments[:160]})" for c in last.message.tool_calls)
        action = (text[:240] + (f" — calls {calls}" if calls else "")).strip(" —")
        action = f"seq {last.seq}: {action}" if action else f"seq {last.seq}"
    request = quote_request(quote, _REQUEST_QUOTE_CHARS) if quote is not None else None
    if request is None and stored is not None and stored.restore.request is not None:
        request = stored.restore.request
    # ENG-2: the task's state through the summarized steps, folded onto the previous
    # summary's (the first summary folds the head the summary keeps verbatim too).
    if stored is not None and stored.restore.task is not None:
        task = TaskState.from_dict(stored.restore.task)
    elif stored is not None:
        task = TaskState(board=dict(stored.restore.board) if stored.restore.board else None)
    else:
        task = TaskState().fold(ctx.head)
    task.fold(middle)
    board = task.board
    restore = RestoreData(tuple(newest[: ctx.config.restore_recent_files]), request, action, board)
    return replace(restore, task=None if task.empty else task.to_dict())


def _raw_under(view: View, budget: Budget, config: PipelineConfig) -> bool:
    """Whether the view is under the trigger even sent whole (layers only ever shrink the
    tail; a summary and its restore message are priced at their stored size plus a margin):
    then no summary is due and the layers need not run (the caller's cache is not here)."""
    raw = sum(e.tokens for e in (*view.pinned, *view.head, *view.entries)) + REPLY_PRIMING
    if view.checkpoint is not None:
        raw += view.checkpoint.tokens + config.instructions_max_chars // 2 + 1_000
    return budget.fixed + raw <= config.compaction_trigger_ratio * budget.input_limit


def plan_summary(
    view: View,
    budget: Budget,
    config: PipelineConfig,
    *,
    force: bool = False,
    cache: EngineCache | None = None,
) -> PipelineSummarize | None:
    """The summary due now, or None (see :mod:`._summary`)."""
    if budget.history_capacity <= 0:
        return None
    if not force and _raw_under(view, budget, config):
        return None
    run = run_layers(view, budget, config, cache or EngineCache(), until="restore")
    ctx = run.context
    history = history_tokens(run.work) + REPLY_PRIMING
    capacity = budget.history_capacity
    over_capacity = history > capacity
    over = budget.fixed + history > config.compaction_trigger_ratio * budget.input_limit
    cooled = _turns_since(view, ctx.summary) >= config.compaction_cooldown_turns
    # The cooldown holds over the window too once a summary stands: until it has passed, the
    # fit layer leaves the oldest tail steps out (their task state kept in the restored
    # context), rather than a new summary rewriting the cached prefix every turn.
    unsummarized = ctx.summary is None and over_capacity
    if not (force or unsummarized or (over and cooled)):
        return None
    tail = ctx.tail
    if not tail:
        return None
    rendered = [0] * len(tail)
    for slot in run.work:
        if slot.zone == "tail":
            rendered[slot.index] = slot.tokens
    starts = list(ctx.schedule.groups)
    # /compact keeps only the newest step (and the newest request's turn, below) verbatim.
    room = 0 if force else math.floor(config.summary_tail_ratio * capacity)
    tail_start = starts[-1]
    kept = sum(rendered[tail_start:])
    for s in reversed(starts[:-1]):
        size = sum(rendered[s:tail_start])
        if kept + size > room:
            break
        kept += size
        tail_start = s
    users = [i for i, e in enumerate(tail) if is_user_turn(e)]
    quote: Entry | None = None
    if users and users[-1] < tail_start:
        u = max(s for s in starts if s <= users[-1])
        if sum(rendered[u:]) <= capacity // 2:
            tail_start = u
        else:
            quote = tail[users[-1]]
    if tail_start <= 0:
        return None
    middle = tail[:tail_start]
    stored = ctx.summary
    base = ctx.base
    previous: tuple[str, ...] = ()
    if stored is not None:
        first, previous = stored.record.first_seq, (stored.body,)
    elif base is not None:
        first, previous = base.first_seq, (base.message.text,)
    else:
        first = middle[0].seq
    target = min(config.summary_max_tokens, math.floor(config.summary_max_ratio * capacity))
    source = sum(e.tokens for e in middle) + sum(s.tokens for s in run.work if s.zone == "summary")
    reason = "forced" if force else ("over the window" if over_capacity else "threshold")
    facts = ctx.schedule.facts
    outputs = [i for i in range(tail_start) if i in facts]
    refs = (
        tuple(
            f"- seq {tail[i].seq}, {facts[i].tool}: {recovery_call(tail[i])}"
            for i in outputs[len(outputs) - config.summary_references :]
        )
        if config.summary_references
        else ()
    )
    return PipelineSummarize(
        first_seq=first,
        last_seq=middle[-1].seq,
        source_first=middle[0].seq,
        made_at_seq=view.end_seq,
        target_tokens=max(target, 64),
        source_tokens=source,
        head_entries=len(ctx.head) if base is None or stored is not None else 0,
        restore=_restore_data(middle, run, stored, quote),
        previous=previous,
        reason=reason,
        keeps_head=base is None or stored is not None,
        references=refs,
        outputs=len(outputs),
    )
