"""The human operations over the context engine: ``context``, ``state``, ``compact`` (LIM-7) and
``cost``.

They are operations of the one registry (OPS-1), on the human surfaces only (CLI, TUI, API):
``comal context``, the TUI's ``/context`` and its status line, and the HTTP API all run the
same handler and get the same answer, judged and receipted by the house. They are registered
once, as values (:data:`HUMAN_OPERATIONS`); each call reaches the host that runs the session
through the house (``CallContext.host``), behind the narrow :class:`HostControls` protocol, so
they see what the agent sends: its system prompt, its tool catalog, its engine and that
engine's settings from the configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ..compaction import SweepReport, dag_report
from ..context import View, config_counter, render_state, work_state
from ..context.dag import DagConfig
from ..context.limit import EngineConfig
from ..errors import ComalError, UserError
from ..ledger import CheckpointRecord, LedgerBackend, Scope, SummaryRecord
from ..ops import CallContext, Handler, Operation, Outcome, Surface, ToolOutput
from ..tokens import REPLY_PRIMING, resolve_window, session_cost
from ..turns import ContextSession
from ..work import board_of, render_work, work_view
from ._cache import (
    CACHE_BREAK_EVENT,
    CACHE_EDIT_EVENT,
    RETENTION_EVENT,
    Retention,
)
from ._errors import SessionLocked
from ._propose import COMPACT_REQUESTED, Preview
from ._session import lock_session

if TYPE_CHECKING:
    from ._propose import Proposer
    from ._settings import AgentSettings

__all__ = [
    "HUMAN_OPERATIONS",
    "HostControls",
    "HumanOperationFailed",
    "context_report",
    "raise_for",
    "render_report",
    "window_note",
]

_HUMAN: frozenset[Surface] = frozenset({"cli", "tui", "api"})


@runtime_checkable
class HostControls(Protocol):
    """What the human operations ask of the host that runs the session (the agent runtime):
    the session, the settings of its next run, a proposer for previews, and a way to queue a
    compaction with a working agent."""

    @property
    def ledger(self) -> LedgerBackend: ...
    @property
    def spec(self) -> str | None: ...
    @property
    def model_name(self) -> str: ...
    @property
    def context_window(self) -> int | None: ...

    def need_scope(self) -> Scope: ...
    def settings(self) -> AgentSettings: ...
    def proposer(self) -> Proposer: ...
    def queue_compact(self) -> bool: ...


def _host(ctx: CallContext) -> HostControls:
    if not isinstance(ctx.host, HostControls):
        raise UserError(
            f"{ctx.operation} needs the session's host (the agent runtime), and this house has "
            "none: run it through comal context/compact or the TUI"
        )
    return ctx.host


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def window_note(model: str | None, window: int | None) -> str | None:
    """Why a window is what it is, when the model is unknown to the catalog (TOK-3)."""
    res = resolve_window(model, override=window)
    if res.source == "fallback":
        return (
            f"model {model or '(none)'} is not in the catalog: the window is the default "
            f"{res.window:,} tokens; pass --context-window N to say what it is"
        )
    return None


def context_report(runtime: HostControls, preview: Preview) -> dict[str, Any]:
    """``/context``: the budget of the next request as the agent would send it (TOK-2..4)."""
    scope = runtime.need_scope()
    budget, assembly, estimate = preview.budget, preview.assembly, preview.estimate
    info = runtime.ledger.session(scope)
    kinds: dict[str, int] = {}
    for action in assembly.actions:
        kinds[type(action).__name__] = kinds.get(type(action).__name__, 0) + 1
    settings = runtime.settings()
    window = settings.window
    # The session row's running totals: one row, however long the session (CCH-2, CCH-4).
    made = info.requests if info is not None else 0
    counts = runtime.ledger.record_counts(
        scope, "event", (RETENTION_EVENT, CACHE_BREAK_EVENT, CACHE_EDIT_EVENT)
    )
    ttl, _ = Retention(settings.cache, RETENTION_EVENT in counts).ttl(made)
    counter = config_counter(settings.engine)
    files = [
        s.as_dict() | {"tokens": counter.count(s.render())} for s in preview.instructions.sources
    ]
    return {
        "session": scope.session,
        "engine": settings.engine_name,
        "model": runtime.spec,
        "window": window.window,
        "window_source": window.source,
        "window_note": window_note(runtime.model_name, runtime.context_window),
        "counter": config_counter(settings.engine).name,
        "system": preview.system_tokens,
        # DRV-1: what the instruction files add to the system prompt, and each file.
        "instructions": preview.instructions_tokens,
        "instruction_files": files,
        "tools": preview.tools_tokens,
        # A request's history is priced with the tokens that prime the reply (a message list
        # counts them once); the stored entries are not, so they are said apart.
        "history": max(assembly.history_tokens - REPLY_PRIMING, 0),
        "reply_priming": min(REPLY_PRIMING, assembly.history_tokens),
        "history_full": info.tokens if info is not None else None,
        "entries": info.entries if info is not None else None,
        "output_reserve": budget.output_reserve,
        "margin": budget.margin,
        "input_estimated": budget.fixed + assembly.history_tokens,
        "input": estimate.tokens,
        "measured": estimate.measured,
        "basis": estimate.basis,
        "utilization": round(estimate.tokens / window.window, 4) if window.window else 0.0,
        "threshold": budget.threshold_tokens,
        "over_threshold": estimate.tokens >= budget.threshold_tokens,
        "stage": assembly.breakdown.get("stage"),
        "actions": kinds,
        "checkpoint_proposed": assembly.checkpoint_to_store is not None,
        "metrics": assembly.metrics.as_dict(timing=False),
        # CCH-1..4: what caching saved so far, the next request's TTL, hidden tools, breaks.
        "savedVsUncached": None
        if info is None or info.saved_usd is None
        else round(info.saved_usd, 6),
        "requests": made,
        "cache_ttl": ttl,
        "tools_deferred": list(preview.deferred),
        "cache_breaks": counts.get(CACHE_BREAK_EVENT, 0),
        "cache_edits": counts.get(CACHE_EDIT_EVENT, 0),
    } | _dag_part(runtime, settings.engine_name, preview)


def _dag_part(runtime: HostControls, engine: str, preview: Preview) -> dict[str, Any]:
    """The dag engine's state (summaries by depth, coverage, pending jobs, summarizer spend and
    breaker) when it runs or the session carries its summaries."""
    scope = runtime.need_scope()
    if engine != "dag" and not runtime.ledger.summary_frontier(scope):
        return {}
    config = runtime.settings().engine
    dag = config if isinstance(config, DagConfig) else DagConfig(counter=runtime.ledger.counter)
    service = ContextSession(runtime.ledger, scope, "dag", dag)
    pending = service.pending(preview.budget, preview.view if engine == "dag" else None)
    return {"dag": dag_report(runtime.ledger, scope, pending, dag)}


def render_report(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The report as (label, value) rows, for a table on any surface."""
    mark = "" if report["measured"] else " ~"
    acts = ", ".join(f"{k}×{n}" for k, n in report["actions"].items()) or "nothing to do"
    rows = [
        ("engine", f"{report['engine']} — stage {report['stage']}: {acts}"),
        ("window", f"{report['window']:,} ({report['window_source']})"),
        ("system", f"{report['system']:,}"),
        ("instructions", _instructions_row(report)),
        ("tools", f"{report['tools']:,}"),
        (
            "history sent",
            f"{report['history']:,} of {report['history_full'] or 0:,} in "
            f"{report['entries'] or 0:,} entries (+{report.get('reply_priming', 0)} to prime "
            "the reply)",
        ),
        ("output reserve", f"{report['output_reserve']:,}"),
        ("margin", f"{report['margin']:,}"),
        (f"input{mark}", f"{report['input']:,} — {report['basis']}"),
        ("threshold", f"{report['threshold']:,}"),
        (
            "utilization",
            f"{report['utilization']:.0%}{mark}"
            + ("  over threshold" if report["over_threshold"] else ""),
        ),
    ]
    saved = report.get("savedVsUncached")
    cache = "unknown" if saved is None else f"${saved:,.4f}"
    cache += f" saved vs uncached over {report.get('requests', 0)} request(s)"
    if report.get("cache_ttl"):
        cache += f"; next TTL {report['cache_ttl']}"
    if report.get("cache_breaks"):
        cache += f"; {report['cache_breaks']} unannounced cache break(s)"
    rows.append(("prompt cache", cache))
    if report.get("tools_deferred"):
        hidden = report["tools_deferred"]
        rows.append(("tools deferred", f"{len(hidden)} behind ToolSearch: {', '.join(hidden)}"))
    if report["checkpoint_proposed"]:
        rows.append(("next request", "derives a checkpoint first"))
    dag = report.get("dag")
    if isinstance(dag, dict):
        depths = ", ".join(f"depth {d}: {n}" for d, n in dag["by_depth"].items()) or "none"
        rows.append(("dag summaries", f"{dag['summaries']} ({depths})"))
        rows.append(
            (
                "dag coverage",
                f"{dag['covered_entries']:,} of {dag['session_entries']:,} entries",
            )
        )
        rows.append(("dag pending", str(len(dag["pending"]))))
        spend = dag["spend"]
        rows.append(("summarizer", f"{dag['summarizer']}; breaker {spend['breaker']}"))
        if dag.get("degraded"):
            rows.append(("degraded", str(dag["degraded"])))
    if report.get("window_note"):
        rows.append(("note", str(report["window_note"])))
    return rows


def _instructions_row(report: dict[str, Any]) -> str:
    files = report.get("instruction_files") or []
    if not files:
        return "0 — no AGENTS.md or CLAUDE.md (workspace, its subdirectories, your config dir)"
    listed = ", ".join(
        f"{f['path']} ({f['scope']}{', cut' if f.get('truncated') else ''}) {f['tokens']:,}"
        for f in files
    )
    return f"{report.get('instructions', 0):,} of the system prompt — {listed}"


class HumanOperationFailed(UserError):
    """A human operation ended in a coded error; ``code`` is that error's."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def raise_for(outcome: Outcome) -> None:
    """Raise the coded error a human operation's receipt carries (surfaces print it)."""
    if not outcome.result.is_error:
        return
    observed = outcome.receipt.observations
    code = observed.get("code")
    message = str(observed.get("message") or outcome.result.text)
    raise HumanOperationFailed(str(code) if code else "OPERATION_FAILED", message)


def _coded(handler: Callable[[Any, CallContext], ToolOutput]) -> Handler:
    """A handler whose coded errors become an error result carrying the code (a receipt is
    still written), instead of an exception the house would report as a crash."""

    def run(args: Any, ctx: CallContext) -> ToolOutput:
        try:
            return handler(args, ctx)
        except ComalError as exc:
            return ToolOutput(
                f"[{exc.code}] {exc}",
                is_error=True,
                observations={"code": exc.code, "message": str(exc)},
            )

    return run


def _context(args: _NoArgs, ctx: CallContext) -> ToolOutput:
    host = _host(ctx)
    report = context_report(host, host.proposer().preview())
    text = "\n".join(f"{label}: {value}" for label, value in render_report(report))
    return ToolOutput(text, observations={"report": report})


def _state(args: _NoArgs, ctx: CallContext) -> ToolOutput:
    host = _host(ctx)
    settings = host.settings()
    config = settings.engine if isinstance(settings.engine, EngineConfig) else EngineConfig()
    scope = host.need_scope()
    view = View.from_ledger(host.ledger, scope)
    current = work_state(view, config)
    text = render_state(current, config_counter(settings.engine))
    # BRD-2, WRK-1: the board as the receipts make it, the tree of work steps, the drafts.
    work = work_view(host.ledger, scope)
    board = board_of(host.ledger, scope)
    lines = render_work(work, board=False)
    text += "\n\nThe board now (from its receipts):\n" + board.render()
    if work["steps"] or work["drafts"] or work["budget_limited"]:
        text += "\n\nWork steps and drafts:\n" + "\n".join(lines)
    return ToolOutput(text, observations={"state": current.to_dict() | {"work": work}})


def _compact(args: _NoArgs, ctx: CallContext) -> ToolOutput:
    host = _host(ctx)
    if host.queue_compact():
        # LIM-7: this process's agent is working; it compacts at the start of its next turn.
        return ToolOutput(
            "queued: the agent compacts at the start of its next turn",
            observations={"queued": True},
        )
    scope = host.need_scope()
    try:
        lock = lock_session(host.ledger, scope)
    except SessionLocked as exc:
        host.ledger.add_record(
            scope, "event", COMPACT_REQUESTED, {"v": 1, "by": f"{ctx.surface}:{ctx.actor.id}"}
        )
        return ToolOutput(
            f"queued: {exc}; the agent compacts at the start of its next turn",
            observations={"queued": True},
        )
    try:
        proposer = host.proposer()
        # The turn service compacts as a queued /compact does: forced, with the configured
        # summarizer, in a sweep under the session's lease when the engine's jobs need one.
        report = proposer.service.compact(proposer.preview().budget)
    finally:
        lock.release()
    return _compacted(report)


def _compacted(report: SweepReport) -> ToolOutput:
    made = tuple(report.made)
    blocked = [{"code": b.code, "message": b.message} for b in report.blocked]
    stopped = report.stopped
    if not made:
        text = (
            "nothing to compact: a stand-in for what precedes the protected tail (the newest "
            "step and the recent outputs) would not make the context smaller"
        )
        text += "".join(f"\n[{b['code']}] {b['message']}" for b in blocked)
        observed = {"queued": False, "made": [], "blocked": blocked, "stopped": stopped}
        return ToolOutput(text, observations=observed)
    lines, records = [], []
    for record in made:
        if isinstance(record, CheckpointRecord):
            lines.append(
                f"checkpoint {record.id} stands for seq {record.first_seq}..{record.last_seq}"
                f" in {record.tokens:,} tokens (sha256 {record.digest[:16]}…)"
            )
            records.append(
                {
                    "kind": "checkpoint",
                    "id": record.id,
                    "first_seq": record.first_seq,
                    "last_seq": record.last_seq,
                    "tokens": record.tokens,
                    "digest": record.digest,
                }
            )
        elif isinstance(record, SummaryRecord):
            sources = f"seq {record.first_seq}..{record.last_seq}"
            if record.kind != "leaf":
                sources = f"summaries {', '.join(map(str, record.children))}"
            lines.append(
                f"summary {record.id} (depth {record.depth}, {record.kind}) of {sources}: "
                f"{record.tokens:,} tokens by {record.summarizer} ({record.level})"
            )
            records.append(
                {
                    "kind": "summary",
                    "id": record.id,
                    "depth": record.depth,
                    "first_seq": record.first_seq,
                    "last_seq": record.last_seq,
                    "children": list(record.children),
                    "tokens": record.tokens,
                    "summarizer": record.summarizer,
                    "level": record.level,
                }
            )
        else:
            lines.append(f"made {type(record).__name__}")
            records.append({"kind": type(record).__name__})
    lines += [f"[{b['code']}] {b['message']}" for b in blocked]
    observed = {"queued": False, "made": records, "blocked": blocked, "stopped": stopped}
    return ToolOutput("\n".join(lines), observations=observed)


def _cost(args: _NoArgs, ctx: CallContext) -> ToolOutput:
    """``/cost``: the session's measured usage per model and its prompt cost at list prices,
    priced as the dashboard prices it; no host needed (the ledger holds it all)."""
    cost = session_cost(ctx.ledger.usage_by_model(ctx.scope))
    info = ctx.ledger.session(ctx.scope)
    lines = []
    for m in cost.models:
        u = m.usage
        counts = [(u.new_input, "new input"), (u.cache_read, "cache read")]
        counts += [(u.cache_write, "cache write"), (u.output, "output")]
        said = ", ".join(f"{n:,} {label}" for n, label in counts if n is not None)
        priced = f"${m.usd:,.4f}" if m.usd is not None else f"unknown: {m.reason}"
        lines.append(f"{m.model or '?'}: {m.requests} request(s), {said or 'no usage'} → {priced}")
    total = "unknown" if cost.usd is None else f"${cost.usd:,.4f}"
    lines.append(f"input cost at list prices: {total} (output tokens are not priced)")
    saved = info.saved_usd if info is not None else None
    if saved is not None:
        lines.append(f"prompt cache saved ${saved:,.4f} against no caching")
    if not cost.models:
        lines = ["no model request recorded in this session yet"]
    models = [
        {"model": m.model, "requests": m.requests, "usage": m.usage.to_dict(), "usd": m.usd}
        for m in cost.models
    ]
    observed = {"input_cost_usd": cost.usd, "unknown": list(cost.unknown), "models": models}
    return ToolOutput("\n".join(lines), observations=observed | {"savedVsUncached": saved})


HUMAN_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "context",
        "The budget of the session's next request, as the agent would send it.",
        _NoArgs,
        _coded(_context),
        audience="human",
        surfaces=_HUMAN,
    ),
    Operation(
        "state",
        "The work state a checkpoint would carry now, the board, the work steps and drafts.",
        _NoArgs,
        _coded(_state),
        audience="human",
        surfaces=_HUMAN,
    ),
    # The ledger gains a stand-in; nothing in the workspace or the world changes, and the
    # history stays whole (LED-1), so the operation is read-only for the policy.
    Operation(
        "cost",
        "What the session's model calls cost at list prices, per model (unknown without a price).",
        _NoArgs,
        _coded(_cost),
        audience="human",
        surfaces=_HUMAN,
    ),
    Operation(
        "compact",
        "Compact now without an LLM (or queue it while the agent works).",
        _NoArgs,
        _coded(_compact),
        audience="human",
        surfaces=_HUMAN,
    ),
)
