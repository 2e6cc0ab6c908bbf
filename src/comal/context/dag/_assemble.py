"""The dag engine's assembly (DAG-4, DAG-5, DAG-6): pure, deterministic, no I/O.

The active memory is the pinned system entries, the latest user request a summary covers (sent
verbatim: a user turn is never replaced by a summary), the summary frontier (each rendered
honestly, :mod:`._present`), the task's state as the summarized and evicted steps left it (goal,
board, work steps, drafts: ENG-2, BRD-2, :mod:`._task`), and every step after the frontier
verbatim. A message too large
for the window alone is bounded head + tail around an honest marker (DAG-5).

When that is over the history capacity (compaction has not caught up: it is deferred, the
breaker is open, or the tail is large), the oldest evictable items leave the *assembly*
(DAG-4): summaries first, then steps, never the fresh tail (the newest ``fresh_tail_turns``
steps) or the step holding the newest user message. Which items leave is decided by walking the
steps in order as if the engine had assembled after each one, evicting down to the compaction
target whenever the capacity is crossed: the decision is a function of the view's prefix, so
between two compactions consecutive requests keep a byte-identical prefix and eviction happens
in rare, deep cuts. A fresh tail over the capacity by itself is bounded message by message;
if even that cannot fit, :class:`~comal.context.ProtectedTailOverflow` is raised.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from ...ledger import Entry, SummaryRecord
from ...messages import Message, Reasoning, Role, Text
from ...tokens import REPLY_PRIMING, Budget, TokenCounter
from .._assembly import (
    Action,
    Assembly,
    Bounded,
    Metrics,
    ProtectedTailOverflow,
    utilization,
)
from .._bound import bound_message, message_chars
from .._render import EngineCache, message_tokens
from .._view import View
from ._config import DagConfig, DagLimits, protected_steps
from ._jobs import Carried, Evicted
from ._present import presented
from ._task import task_message

__all__ = ["Step", "assemble", "steps_of"]

# Tokens kept free for the note that says what eviction left out.
NOTE_RESERVE = 120
_ROUNDS = 8
_MIN_SQUEEZE = 64


@dataclass(slots=True)
class Step:
    """One step of the view (a message, or an assistant message with its results), with the
    forms the engine sends and their prices."""

    entries: list[Entry]
    messages: list[Message]
    sizes: list[int]
    bounded: dict[int, Bounded] = field(default_factory=dict)
    has_user: bool = False

    @property
    def tokens(self) -> int:
        return sum(self.sizes)

    @property
    def raw_tokens(self) -> int:
        return sum(e.tokens for e in self.entries)


def _chars(entry: Entry, cache: EngineCache) -> int:
    return cache.facts.get(("dag-chars", entry.digest), lambda: message_chars(entry.message))


def steps_of(
    entries: tuple[Entry, ...],
    limits: DagLimits,
    counter: TokenCounter,
    cache: EngineCache,
) -> list[Step]:
    """``entries`` cut into their steps (the ledger's ``step``), each message bounded when it
    alone is over the single-message bound (DAG-5)."""
    steps: list[Step] = []
    for e in entries:
        if not steps or e.step != steps[-1].entries[0].step:
            steps.append(Step([], [], []))
        step = steps[-1]
        message, tokens = e.message, e.tokens
        # Characters are counted only where they could matter (no text runs over ~10 a token).
        long = e.tokens * 10 > limits.single_chars and _chars(e, cache) > limits.single_chars
        if e.tokens > limits.single_bound or long:
            b = bound_message(e, limits.single_bound, limits.single_chars, counter, cache)
            if b.tokens < e.tokens:
                message, tokens = b.message, b.tokens
                step.bounded[len(step.entries)] = Bounded(e.id, e.seq, e.tokens, b.tokens, b.fields)
        step.entries.append(e)
        step.messages.append(message)
        step.sizes.append(tokens)
        step.has_user = step.has_user or e.role == Role.USER.value
    return steps


def priced(message: Message | None, counter: TokenCounter, cache: EngineCache) -> int:
    """The tokens of a message the engine writes (the carried request, the task's state, the
    eviction note), remembered: each is the same from one compaction to the next, and
    counting a long request again every turn was most of a turn's time (issue 33, item 2)."""
    if message is None:
        return 0
    key = ("dag-message", message, counter.name)
    return cache.facts.get(key, lambda: message_tokens(counter, message))


def _carried(view: View) -> Entry | None:
    # Carried until the frontier changes, even once a newer request is in the entries: it
    # changes only when a compaction does, so it never breaks the cached prefix between two.
    return view.carried[-1] if view.carried else None


def carried_message(entry: Entry) -> Message:
    note = (
        f"[comal: the latest user request the summaries below cover (seq {entry.seq}, "
        f"{entry.created_at}), repeated verbatim]"
    )
    return Message(Role.USER, (Text(note), *entry.message.parts), entry.message.name)


@dataclass(slots=True)
class _Fit:
    evicted: list[int] = field(default_factory=list)  # candidate indices
    decided_at: int = -1
    total: int = 0


def _evict(
    summary_sizes: list[int], steps: list[Step], base: int, limits: DagLimits, tail: int
) -> _Fit:
    """Which candidates (summaries, then steps) leave; see the module docstring."""
    n_s = len(summary_sizes)
    sizes = summary_sizes + [s.tokens for s in steps]
    fit = _Fit(total=base + sum(summary_sizes))
    at = 0
    user_step = -1
    room = limits.capacity - NOTE_RESERVE

    def cut(bound: int, seq: int) -> None:
        nonlocal at
        while fit.total > limits.target and at < bound:
            k = at
            at += 1
            if k >= n_s and k - n_s == user_step:
                continue  # never the newest user turn
            fit.total -= sizes[k]
            fit.evicted.append(k)
            fit.decided_at = seq

    if fit.total > room:
        cut(n_s, -1)
    for j, step in enumerate(steps):
        fit.total += step.tokens
        if step.has_user:
            user_step = j
        if fit.total > room:
            # The fresh tail, shorter when it alone would not fit the window.
            sizes_now = [s.tokens for s in steps[: j + 1]]
            kept = protected_steps(sizes_now, tail, room - base)
            cut(n_s + max(0, j - kept + 1), step.entries[-1].seq)
    return fit


def _level(sizes: list[int], room: int) -> int:
    left = room
    ordered = sorted(sizes)
    for k, size in enumerate(ordered):
        share = left // (len(ordered) - k)
        if size > share:
            return share
        left -= size
    return max(ordered, default=0)


def _squeeze(
    steps: list[Step], room: int, limits: DagLimits, counter: TokenCounter, cache: EngineCache
) -> int:
    """Bound the kept steps' largest messages until they fit ``room``; their tokens."""
    flat = [(s, i) for s in steps for i in range(len(s.entries))]
    sizes = [s.sizes[i] for s, i in flat]
    total = sum(sizes)
    cap = _level(sizes, room)
    for _ in range(_ROUNDS):
        if total <= room or cap < _MIN_SQUEEZE:
            break
        total = 0
        for (step, i), size in zip(flat, sizes, strict=True):
            if size <= cap:
                total += size
                continue
            e = step.entries[i]
            b = bound_message(e, cap, limits.single_chars, counter, cache)
            if b.tokens >= size:
                total += size
                continue
            step.messages[i], step.sizes[i] = b.message, b.tokens
            step.bounded[i] = Bounded(e.id, e.seq, e.tokens, b.tokens, b.fields)
            total += b.tokens
        sizes = [s.sizes[i] for s, i in flat]
        cap -= max(1, (total - room) // max(1, sum(1 for s, i in flat if i in s.bounded)))
    return total


def _note(summaries: list[SummaryRecord], entries: list[Entry]) -> Message:
    parts = []
    if summaries:
        ids = ", ".join(str(s.id) for s in summaries[:6]) + (" …" if len(summaries) > 6 else "")
        parts.append(f"{len(summaries)} older summaries ({ids})")
    if entries:
        parts.append(f"{len(entries)} messages (seq {entries[0].seq}..{entries[-1].seq})")
    return Message(
        Role.USER,
        (
            Text(
                f"[comal: to fit the window, {' and '.join(parts)} are left out of this context. "
                "Nothing is deleted: ctx_search finds them, ctx_expand(summary=ID) or "
                "ctx_expand(entry=ID) returns them exactly.]"
            ),
        ),
    )


def assemble(
    view: View,
    budget: Budget,
    config: DagConfig | None = None,
    *,
    cache: EngineCache | None = None,
) -> Assembly:
    """The active memory for the next request; see the module docstring."""
    started = time.perf_counter()
    budget.check_overhead()
    config = config if config is not None else DagConfig()
    cache = cache if cache is not None else EngineCache()
    counter = config.token_counter
    limits = DagLimits.of(budget, config)
    pinned = sum(e.tokens for e in view.pinned)
    carried = _carried(view)
    carried_msg = carried_message(carried) if carried is not None else None
    carried_tokens = priced(carried_msg, counter, cache)
    task_msg = task_message(view, carried=carried)
    task_tokens = priced(task_msg, counter, cache)
    shown = [presented(s, counter, cache) for s in view.summaries]
    steps = steps_of(view.entries, limits, counter, cache)
    base = pinned + carried_tokens + task_tokens + REPLY_PRIMING
    fit = _evict([t for _, t in shown], steps, base, limits, config.fresh_tail_turns)
    gone = set(fit.evicted)
    n_s = len(shown)
    kept_summaries = [i for i in range(n_s) if i not in gone]
    kept_steps = [steps[j] for j in range(len(steps)) if n_s + j not in gone]
    out_summaries = [view.summaries[i] for i in range(n_s) if i in gone]
    out_entries = [e for j, st in enumerate(steps) if n_s + j in gone for e in st.entries]
    note = _note(out_summaries, out_entries) if gone else None
    note_tokens = priced(note, counter, cache)
    if out_entries:
        # ENG-2: what the evicted steps did to the task stays in the context.
        task_msg = task_message(view, out_entries, carried=carried)
        grown = priced(task_msg, counter, cache)
        note_tokens += grown - task_tokens
    fixed_part = base + note_tokens + sum(shown[i][1] for i in kept_summaries)
    history = fixed_part + sum(s.tokens for s in kept_steps)
    squeezed = False
    if history > limits.capacity:
        squeezed = True
        room = limits.capacity - fixed_part
        history = fixed_part + _squeeze(kept_steps, room, limits, counter, cache)
    if history > limits.capacity:
        raise ProtectedTailOverflow(
            f"CONTEXT_PRESSURE_LOOP: the fresh tail ({config.fresh_tail_turns} steps), the "
            f"pinned instructions and the summaries need {history:,} history tokens even "
            f"bounded head + tail, over the {limits.capacity:,} the window leaves. Nothing is "
            "lost: the ledger keeps the whole session. Lower fresh_tail_turns, shorten the "
            "instructions or tool schemas, or use a model with a larger window."
        )
    messages: list[Message] = [*view.system, *(e.message for e in view.pinned)]
    ids: list[int | None] = [None] * len(view.system) + [e.id for e in view.pinned]
    actions: list[Action] = []
    if carried is not None and carried_msg is not None:
        # Before the summaries: it changes only when a newer request is covered, so a new leaf
        # appended to the frontier leaves it in the cached prefix (issue 33: it was written
        # again at every compaction).
        messages.append(carried_msg)
        ids.append(carried.id)
        actions.append(Carried(carried.id, carried.seq))
    if note is not None:
        messages.append(note)
        ids.append(None)
    for i in kept_summaries:
        messages.append(shown[i][0])
        ids.append(None)
    if task_msg is not None:
        messages.append(task_msg)
        ids.append(None)
    for step in kept_steps:
        messages += step.messages
        ids += [e.id for e in step.entries]
        actions += [step.bounded[i] for i in sorted(step.bounded)]
    if gone:
        evicted_tokens = sum(shown[i][1] for i in range(n_s) if i in gone) + sum(
            st.tokens for j, st in enumerate(steps) if n_s + j in gone
        )
        actions.append(
            Evicted(
                tuple(s.id for s in out_summaries),
                out_entries[0].seq if out_entries else -1,
                out_entries[-1].seq if out_entries else -1,
                len(out_entries),
                evicted_tokens,
                fit.decided_at,
            )
        )
    else:
        evicted_tokens = 0
    masked = sum(a.tokens_before - a.tokens_after for a in actions if isinstance(a, Bounded))
    thinking = sum(
        isinstance(p, Reasoning)
        for st in kept_steps
        for i in st.bounded
        for p in st.entries[i].message.parts
    ) + sum(isinstance(p, Reasoning) for e in out_entries for p in e.message.parts)
    summary_tokens = sum(shown[i][1] for i in kept_summaries)
    stage = "summaries" if kept_summaries else "verbatim"
    if gone:
        stage += "+evicted"
    if squeezed:
        stage += "+bounded-tail"
    loaded = budget.fixed + history
    kinds = {type(a) for a in actions}
    metrics = Metrics(
        tokens_loaded=loaded,
        tokens_evicted=evicted_tokens,
        tokens_masked=masked,
        tokens_compacted=summary_tokens,
        thinking_blocks_removed=thinking,
        budget_utilization=utilization(loaded, budget.input_limit),
        session_depth=view.end_seq,
        session_tool_results=sum(e.message.tool_result is not None for e in view.entries),
        layer_count=len(kinds) + (1 if kept_summaries else 0),
    )
    breakdown: dict[str, int | float | str | None] = {
        **budget.breakdown(),
        "engine": "dag",
        "stage": stage,
        "history_tokens": history,
        "total_input_tokens": loaded,
        "history_trigger": limits.trigger,
        "history_target": limits.target,
        "single_message_bound": limits.single_bound,
        "pinned_tokens": pinned,
        "summaries_sent": len(kept_summaries),
        "summary_tokens": summary_tokens,
        "entries_sent": sum(len(s.entries) for s in kept_steps),
        "evicted_tokens": evicted_tokens,
        "carried_request": carried.seq if carried is not None else None,
    }
    return Assembly(
        messages=tuple(messages),
        entry_ids=tuple(ids),
        history_tokens=history,
        breakdown=breakdown,
        actions=tuple(actions),
        metrics=replace(metrics, duration_ms=(time.perf_counter() - started) * 1000),
        checkpoint_to_store=None,
        next_state=None,
    )
