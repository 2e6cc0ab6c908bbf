"""Engine commands: replay, state, compact, evidence (LIM-7, EVI-2)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..agent import Flags, Proposer
    from ..context import (
        Assembly,
        Engine,
        ReplayTurn,
    )
    from ..ledger import LedgerBackend, Scope
    from ..messages import Message
    from ..tokens import Budget
from ..safe_text import safe
from ._common import JsonOpt, Output, coded_errors, emit_json, err, ledger, out

app = typer.Typer()

WindowOpt = Annotated[
    int | None,
    typer.Option("--context-window", help="Cap the window (minimum with the model's).", min=1),
]
ModelOpt = Annotated[str | None, typer.Option(help="Model to budget for (provider:model).")]
EngineOpt = Annotated[
    str, typer.Option(help="Context engine from the registry (limit is the default).")
]


def _budget(model: str | None, window: int | None) -> Budget:
    from ..tokens import Budget, resolve_window

    res = resolve_window(model, override=window)
    return Budget.for_window(res.window, system_tokens=0, tools_tokens=0, max_output=res.max_output)


def _session_for(led: LedgerBackend, target: str) -> Scope:
    """A transcript path is imported (once: importing again finds it); else a session id."""
    from ..importers import load, store

    path = Path(target)
    if path.is_file():
        stored = store(led, load(path))
        return led.resolve(stored[0].session)
    return led.resolve(target)


def _turn_dict(t: ReplayTurn) -> dict[str, Any]:
    from ..context import action_dict

    out: dict[str, Any] = {
        "turn": t.turn,
        "seq": t.seq,
        "input_tokens": t.input_tokens,
        "full_tokens": t.full_tokens,
        "fits": t.fits,
        "actions": [action_dict(a) for a in t.actions],
    }
    if t.error:
        out["error"] = t.error
    if t.assembly is not None:
        out["utilization"] = t.assembly.metrics.budget_utilization
        out["assembly_ms"] = round(t.assembly.metrics.duration_ms, 3)
    return out


def _summary(turns: list[ReplayTurn], budget: Budget) -> dict[str, Any]:
    sent = sum(t.input_tokens for t in turns)
    full = sum(t.full_tokens for t in turns)
    times = sorted(t.assembly.metrics.duration_ms for t in turns if t.assembly is not None)
    return {
        "turns": len(turns),
        "window": budget.window,
        "tokens_sent": sent,
        "tokens_full": full,
        "reduction": round(full / sent, 3) if sent else None,
        "peak_input": max((t.input_tokens for t in turns), default=0),
        "full_over_window": sum(1 for t in turns if t.full_tokens > budget.input_limit),
        "over_window": sum(1 for t in turns if not t.fits),
        "errors": sorted({t.error for t in turns if t.error}),
        "checkpoints": sum(1 for t in turns if t.checkpoint is not None),
        "references": sum(1 for t in turns for a in t.actions if type(a).__name__ == "Referenced"),
        "assembly_ms_p50": times[len(times) // 2] if times else None,
        "assembly_ms_max": times[-1] if times else None,
    }


def _plot(
    turns: list[ReplayTurn], budget: Budget, path: Path, title: str, engine: str = "limit"
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [t.turn for t in turns]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    top.plot(xs, [t.full_tokens for t in turns], label="full history (unmanaged)", color="grey")
    top.plot(xs, [t.input_tokens for t in turns], label=f"comal {engine}", color="tab:blue")
    top.axhline(budget.input_limit, color="tab:red", linestyle="--", label="input limit")
    for t in turns:
        if t.checkpoint is not None:
            top.axvline(t.turn, color="tab:green", alpha=0.3)
    top.set_ylabel("input tokens per request")
    top.legend(loc="upper left", fontsize=8)
    top.set_title(title, fontsize=10)
    bottom.plot(
        xs,
        [t.assembly.metrics.budget_utilization if t.assembly else 0.0 for t in turns],
        color="tab:blue",
    )
    bottom.axhline(1.0, color="tab:red", linestyle="--")
    bottom.set_ylabel("budget utilization")
    bottom.set_xlabel("model call (green: checkpoint derived)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)


@app.command("replay")
def replay_cmd(
    target: Annotated[str, typer.Argument(help="A transcript file, or an imported session id.")],
    engine: EngineOpt = "",
    context_window: WindowOpt = None,
    model: ModelOpt = None,
    dump: Annotated[
        Path | None, typer.Option(help="Write each turn's Anthropic request to DIR.")
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="Draw tokens and utilization (PNG).")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per line: each turn, then a summary.")
    ] = False,
) -> None:
    """Replay a session turn by turn as the agent would have experienced it under the engine:
    at each model call, the active memory assembled from the ledger up to that point. A session
    the agent ran is replayed with its system prompt and tools under the current settings, so
    the requests are the ones it sent; a transcript is replayed with neither.

    Example: comal replay run.traj.json --context-window 45000 --plot replay.png
    """
    from ..agent import Flags
    from ..turns import replay

    with coded_errors(as_json):
        dumps = None if dump is None else Output.prepare(dump, "--dump", folder=True)
        drawn = None if plot is None else Output.prepare(plot, "--plot")
    with coded_errors(as_json), ledger(create=Path(target).is_file()) as led:
        scope = _session_for(led, target)
        entries = list(led.iter_entries(scope))
        plan = _replay_plan(led, scope, Flags(model=model, context_window=context_window,
                                              engine=engine or None))  # fmt: skip
        turns: list[ReplayTurn] = []
        replayed = replay(
            entries, scope.session, plan.budget, plan.config, engine=plan.engine,
            system=plan.system,
        )  # fmt: skip
        for t in replayed:
            turns.append(t)
            if as_json:
                emit_json(_turn_dict(t))
            if dumps is not None and t.assembly is not None:
                body = plan.request(t.assembly, t.turn)
                text = json.dumps(body, ensure_ascii=False, indent=1)
                with dumps.writing() as folder:
                    (folder / f"turn-{t.turn:04d}.json").write_text(text, encoding="utf-8")
    budget = plan.budget
    summary = _summary(turns, budget) | {"session": scope.session, "engine": plan.engine.name}
    if drawn is not None:
        title = f"{scope.session[:8]} at {budget.window:,} tokens"
        with coded_errors(as_json), drawn.writing() as path:
            _plot(turns, budget, path, title, plan.engine.name)
    if as_json:
        emit_json({"summary": summary})
        return
    table = Table("turn", "full", "sent", "fits", "actions", title=f"replay of {scope.session}")
    for t in turns:
        kinds: dict[str, int] = {}
        for a in t.actions:
            kinds[type(a).__name__] = kinds.get(type(a).__name__, 0) + 1
        acts = ", ".join(f"{k}×{n}" for k, n in kinds.items()) or (t.error or "")
        table.add_row(
            str(t.turn), f"{t.full_tokens:,}", f"{t.input_tokens:,}", "✓" if t.fits else "✗", acts
        )
    out.print(table)
    out.print(
        f"window {budget.window:,}: sent {summary['tokens_sent']:,} tokens over "
        f"{summary['turns']} calls vs {summary['tokens_full']:,} unmanaged "
        f"(×{summary['reduction']}); {summary['checkpoints']} checkpoint(s), "
        f"{summary['references']} reference(s); over the window: {summary['over_window']} "
        f"(unmanaged: {summary['full_over_window']})"
    )
    if plan.note:
        err.print(plan.note)
    if plot is not None:
        err.print(f"plot written to {plot}")


@dataclass(frozen=True)
class _ReplayPlan:
    engine: Engine
    config: BaseModel
    budget: Budget
    system: tuple[Message, ...]
    proposer: Proposer | None
    note: str | None

    def request(self, assembly: Assembly, turn: int = 1) -> dict[str, Any]:
        from ..messages.wire import to_anthropic
        from ..providers import anthropic_params

        if self.proposer is not None:
            ttl = self.proposer.ttl_at(turn - 1)  # the TTL the live request had (CCH-4)
            request = self.proposer.request_for(assembly, self.budget.output_reserve, ttl=ttl)
            return anthropic_params(request)
        return dict(to_anthropic(assembly.messages)) | {"tools": []}


def _replay_plan(led: LedgerBackend, scope: Scope, flags: Flags) -> _ReplayPlan:
    """The agent's own budget, system prompt, tools and engine settings for a session the
    agent ran (its meta names a model); a bare budget for an imported transcript."""
    from ..agent import Runtime, window_note
    from ..context import get_engine

    info = led.session(scope)
    meta = info.meta if info is not None else {}
    runtime = Runtime.open(led, flags, resume=scope.session, need_model=False)
    settings = runtime.settings()
    engine = get_engine(settings.engine_name)
    if meta.get("model") and info is not None and info.source is None:
        with runtime.closing():  # the catalog is read; a replay runs no tool
            proposer = runtime.proposer()
        return _ReplayPlan(
            engine, settings.engine, proposer.budget(), (proposer.system_message,), proposer,
            window_note(runtime.model_name, flags.context_window),
        )  # fmt: skip
    budget = _budget(flags.model, flags.context_window)
    return _ReplayPlan(
        engine, settings.engine, budget, (), None, window_note(flags.model, flags.context_window)
    )


@app.command("state")
def state_cmd(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    as_json: JsonOpt = False,
) -> None:
    """Show the work state a checkpoint would carry now: requests, plan, files with their last
    digests, commands with exit codes, last errors, open calls (= /state).

    Example: comal state 3f2a
    """
    from ..agent import Flags, Runtime, raise_for

    with coded_errors(as_json), ledger() as led:
        runtime = Runtime.open(led, Flags(), resume=session, need_model=False)
        with runtime.closing():
            outcome = runtime.control("state", {}, surface="cli")
        raise_for(outcome)
    if as_json:
        emit_json(outcome.receipt.observations.get("state", {}))
    else:
        out.print(safe(outcome.result.text), markup=False)


@app.command("compact")
def compact_cmd(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    engine: EngineOpt = "",
    context_window: WindowOpt = None,
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compact the session now, without an LLM, over everything before the protected tail
    (= /compact): the limit engine stores a checkpoint. If an agent holds the session, the
    request is queued and applied at the start of its next turn. The history stays in the
    ledger.

    Example: comal compact 3f2a
    """
    from ..agent import Flags, Runtime, raise_for

    with coded_errors(as_json), ledger() as led:
        flags = Flags(model=model, context_window=context_window, engine=engine or None)
        runtime = Runtime.open(led, flags, resume=session, need_model=False)
        with runtime.closing():
            outcome = runtime.control("compact", {}, surface="cli")
        raise_for(outcome)
    observed = outcome.receipt.observations
    made = list(observed.get("made", []))
    checkpoint = next((m for m in made if m.get("kind") == "checkpoint"), None)
    result: dict[str, Any] = {
        "session": runtime.need_scope().session,
        "checkpoint": None if checkpoint is None else {
            k: v for k, v in checkpoint.items() if k != "kind"
        },
        "made": made,
        "queued": bool(observed.get("queued")),
        "blocked": list(observed.get("blocked", [])),
        "stopped": observed.get("stopped", "done"),
    }  # fmt: skip
    if as_json:
        emit_json(result)
    else:
        out.print(safe(outcome.result.text), markup=False)


def _address(n: str = "N") -> str:
    return (
        f"give --entry {n} (a ledger entry: the entry column of `comal show`) or --record {n} "
        "(an output stored whole at write time: `comal show` and the cut's note name it), or "
        "paste the EvidenceRead(...) call a reference or a note shows, e.g. "
        "EvidenceRead(record=2, offset=8000)"
    )


def _evidence_args(call: str | None, given: dict[str, Any]) -> Any:
    """The operation's input (:class:`comal.ops.EvidenceReadInput`) from the pasted call and
    the options, the options winning; exactly one of entry and record."""
    from pydantic import ValidationError

    from ..evidence import EvidenceArgumentError, evidence_call_arguments
    from ..ops import EvidenceReadInput

    args: dict[str, Any] = {}
    if call is not None:
        text = call.strip()
        if text.isdigit():
            raise EvidenceArgumentError(
                f"{text!r} alone names neither an entry nor a record; {_address(text)}"
            )
        if not text.startswith("EvidenceRead("):
            text = f"EvidenceRead({text})"
        args = evidence_call_arguments(text)
    args |= {k: v for k, v in given.items() if v is not None}
    if ("entry" in args) == ("record" in args):
        raise EvidenceArgumentError(
            ("both an entry and a record are named; " if "entry" in args else "nothing to read: ")
            + _address()
        )
    try:
        return EvidenceReadInput(**args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise EvidenceArgumentError(f"bad EvidenceRead arguments: {problems}") from None


@app.command("evidence")
def evidence_cmd(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    call: Annotated[
        str | None,
        typer.Argument(
            help="The EvidenceRead(...) call a reference or a cut note shows (or its arguments "
            "alone: record=2, offset=8000), pasted as it is.",
            metavar="[CALL]",
        ),
    ] = None,
    entry: Annotated[
        int | None, typer.Option(help="A ledger entry id (the entry column of comal show).", min=1)
    ] = None,
    record: Annotated[
        int | None,
        typer.Option(help="A stored output record (an output cut at write time).", min=1),
    ] = None,
    field: Annotated[str | None, typer.Option(help="content | text | arguments")] = None,
    offset: Annotated[int | None, typer.Option(help="Offset in UTF-16 code units.", min=0)] = None,
    limit: Annotated[int | None, typer.Option(help="Page size (≤ 8,000 units).", min=1)] = None,
    search: Annotated[str | None, typer.Option(help="Substring to find.")] = None,
    regex: Annotated[bool, typer.Option(help="Treat --search as a regex.")] = False,
    digest: Annotated[
        str | None, typer.Option(help="Expected sha256; a mismatch is an error.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Read stored output exactly, one page at a time: what the model's EvidenceRead reads, by
    the same address (an entry, or a record the write-time guard stored).

    Example: comal evidence 3f2a --entry 812 --search Traceback
    """
    from ..ops import read_page

    given = {
        "entry": entry, "record": record, "field": field, "offset": offset, "limit": limit,
        "search": search, "regex": True if regex else None, "expected_digest": digest,
    }  # fmt: skip
    with coded_errors(as_json), ledger() as led:
        args = _evidence_args(call, given)
        page = read_page(led, led.resolve(session), args)
    if as_json:
        emit_json(
            {
                "text": page.text,
                "digest": page.digest,
                "offset": page.offset,
                "end": page.end,
                "total_utf16": page.total_utf16,
                "matches": list(page.matches),
                "next_call": page.next_call,
            }
        )
    else:
        typer.echo(page.text, nl=False)
        err.print(
            f"\n[{page.target} {page.entry_id}: {page.offset}..{page.end} of {page.total_utf16} "
            f"UTF-16 units; sha256 {page.digest}]"
            + (f" next: {page.next_call}" if page.next_call else ""),
            markup=False,
        )
