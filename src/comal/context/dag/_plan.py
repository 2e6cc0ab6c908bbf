"""What maintenance the dag engine asks for after a turn (DAG-1, DAG-2): pure, no I/O.

- Leaves: when a pass is due (:mod:`._timing`, ENG-1: over ``context_threshold`` and paying
  back what it rewrites, or the cache cold anyway, or a deferred debt at ``hard_threshold``),
  the oldest out-of-tail whole steps are cut into chunks of at most the chunk cap, oldest first,
  until the history, counting each new leaf at its target, is down to the compaction target.
  A pass that would not pay back yet is a :class:`Deferred` job: recorded, not run.
  A chunk under ``leaf_min_chunk_tokens`` is not worth a pass (it would fire every turn and
  rewrite the cached prefix each time, lossless-claw #282) unless ``force`` (``/compact``).
- Condensing: the oldest run of ``condensed_min_fanout`` adjacent frontier summaries of one
  depth folds into one of the next depth. The frontier stays O(fanout × depth).
- Blocked: over the capacity with nothing worth summarizing (the protected tail alone is too
  big, lossless-claw #639) is reported as a :class:`Blocked` job with a code, before any
  summarizer call; the assembly evicts and bounds instead.

Plans are a function of the view alone, so pending work is never lost: a process that dies
mid-sweep leaves a ledger whose next plan asks for the rest.
"""

from __future__ import annotations

from ...ledger import SummaryRecord
from ...messages import Role
from ...tokens import REPLY_PRIMING, Budget
from .._engine import Job
from .._render import EngineCache
from .._view import View
from ._assemble import _carried, carried_message, priced
from ._config import DagConfig, DagLimits, protected_steps
from ._jobs import Blocked, Condense, Deferred, SummarizeLeaf
from ._present import presented
from ._task import task_message
from ._timing import timing

__all__ = ["plan"]

# What a leaf is expected to cost in context beyond its body: header, wrapper, footer.
PRESENTATION_TOKENS = 110


def _condense(
    summaries: tuple[SummaryRecord, ...], config: DagConfig, limits: DagLimits
) -> list[Job]:
    fanout = config.condensed_min_fanout
    run: list[SummaryRecord] = []
    for s in summaries:
        if run and s.depth == run[-1].depth and s.first_seq == run[-1].last_seq + 1:
            run.append(s)
        else:
            run = [s]
        if len(run) == fanout:
            return [
                Condense(
                    children=tuple(r.id for r in run),
                    depth=run[0].depth + 1,
                    first_seq=run[0].first_seq,
                    last_seq=run[-1].last_seq,
                    source_tokens=sum(r.tokens for r in run),
                    target_tokens=limits.condensed_target,
                )
            ]
    return []


def plan(
    view: View,
    budget: Budget,
    config: DagConfig,
    *,
    force: bool = False,
    cache: EngineCache | None = None,
) -> tuple[Job, ...]:
    """The jobs due now; see the module docstring. ``cache`` is the caller's (summaries'
    rendered prices are remembered there)."""
    if budget.history_capacity <= 0:
        return ()
    limits = DagLimits.of(budget, config)
    counter = config.token_counter
    cache = cache if cache is not None else EngineCache(64)
    carried = _carried(view)
    carried_tokens = priced(carried_message(carried), counter, cache) if carried else 0
    task = task_message(view, carried=carried)
    carried_tokens += priced(task, counter, cache)
    fixed = sum(e.tokens for e in view.pinned) + carried_tokens + REPLY_PRIMING
    summaries = sum(presented(s, counter, cache)[1] for s in view.summaries)
    # Step boundaries from the ledger; a message over the single bound is sent bounded.
    steps: list[list[int]] = []  # indices into view.entries
    for i, e in enumerate(view.entries):
        if not steps or e.step != view.entries[steps[-1][0]].step:
            steps.append([])
        steps[-1].append(i)
    sizes = [sum(min(view.entries[i].tokens, limits.single_bound) for i in st) for st in steps]
    history = fixed + summaries + sum(sizes)
    jobs: list[Job] = []
    kept = protected_steps(sizes, config.fresh_tail_turns, limits.capacity - fixed)
    tail = len(steps) - kept
    # A chunk too small to be worth a pass, scaled down for a small window (where a step alone
    # may be a quarter of what fits).
    min_chunk = min(config.leaf_min_chunk_tokens, max(1, limits.capacity // 4))
    request = view.summaries[-1].meta.get("request_seq") if view.summaries else None
    when = timing(
        view, config, history, trigger=limits.trigger, target=limits.target, hard=limits.hard,
        min_chunk=min_chunk, force=force,
    )  # fmt: skip
    if when.reason == "deferred":
        jobs.append(
            Deferred(
                history_tokens=history,
                trigger_tokens=limits.trigger,
                hard_tokens=limits.hard,
                pays_back_after=when.pays_back_after or 0.0,
                calls=when.calls,
                frontier_seq=max((s.last_seq for s in view.summaries), default=-1),
            )
        )
    if when.due:
        estimate = history
        k = 0
        while k < tail and (estimate > limits.target or force):
            start, tokens, raw = k, 0, 0
            while k < tail and (k == start or raw + _raw(view, steps[k]) <= limits.chunk_cap):
                tokens += sizes[k]
                raw += _raw(view, steps[k])
                k += 1
            target = limits.leaf_target
            if raw < min_chunk and not force:
                break
            if tokens <= target + PRESENTATION_TOKENS:
                break  # a summary of this would not be smaller than what it replaces
            first = view.entries[steps[start][0]]
            last = view.entries[steps[k - 1][-1]]
            for idx in (i for st in steps[start:k] for i in st):
                if view.entries[idx].role == Role.USER.value:
                    request = view.entries[idx].seq
            jobs.append(
                SummarizeLeaf(
                    first_seq=first.seq,
                    last_seq=last.seq,
                    entries=last.seq - first.seq + 1,
                    source_tokens=raw,
                    target_tokens=target,
                    oversize=k - start == 1 and raw > limits.chunk_cap,
                    request_seq=request if isinstance(request, int) else None,
                    reason=when.reason,
                )
            )
            estimate -= tokens - target - PRESENTATION_TOKENS
        # Over the capacity, the assembly leaves the oldest summaries and steps out (DAG-4);
        # only what it never leaves out (instructions, the task's state, the fresh tail) over
        # the capacity is a pressure loop no pass can end.
        protected = fixed + sum(sizes[tail:])
        if not jobs and protected > limits.capacity:
            jobs.append(
                Blocked(
                    code="CONTEXT_PRESSURE_LOOP",
                    message=(
                        f"cannot get smaller: {history:,} history tokens against a capacity of "
                        f"{limits.capacity:,}, and the {tail} out-of-tail steps hold too little "
                        f"to summarize (the newest step, the instructions and the task's state "
                        f"take {protected:,}). The assembly bounds the newest step instead; "
                        "shorten the instructions or tool schemas, or use a larger window."
                    ),
                    history_tokens=history,
                    protected_tokens=protected,
                )
            )
    jobs += _condense(view.summaries, config, limits)
    return tuple(jobs)


def _raw(view: View, step: list[int]) -> int:
    return sum(view.entries[i].tokens for i in step)
