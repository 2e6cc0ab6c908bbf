"""``comal replay``: a session turn by turn as the agent would have experienced it under an
engine (LIM-1..3, OBS-1/2), and what the engine did, as ``comal events`` would list it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..agent import Flags, Instructions, Proposer
    from ..context import Assembly, Engine, ReplayTurn
    from ..ledger import LedgerBackend, Scope
    from ..messages import Message
    from ..tokens import Budget
from ..safe_text import safe
from ._common import (
    EngineOpt,
    ModelOpt,
    Output,
    WindowOpt,
    coded_errors,
    emit_json,
    err,
    ledger,
    out,
)

app = typer.Typer()


def _budget(model: str | None, window: int | None) -> Budget:
    from ..tokens import Budget, resolve_window

    res = resolve_window(model, override=window)
    return Budget.for_window(res.window, system_tokens=0, tools_tokens=0, max_output=res.max_output)


def _missing_file(target: str) -> None:
    """A target written as a path (a separator or a suffix: session ids have neither) that
    names no file is said as such, not as a session that does not match."""
    from ..errors import InputError

    path = Path(target).expanduser()
    if path.is_file() or not ("/" in target or "\\" in target or path.suffix):
        return
    what = "a folder, not a transcript file" if path.is_dir() else "no such file"
    raise InputError(
        f"{what}; give a transcript file that exists, or a session id (`comal sessions` lists "
        "them)",
        path=target,
    )


def _session_for(led: LedgerBackend, target: str) -> Scope:
    """A transcript path is imported (once: importing again finds it); else a session id."""
    from ..importers import load, store

    path = Path(target)
    if path.is_file():
        stored = store(led, load(path))
        return led.resolve(stored[0].session)
    return led.resolve(target)


def turn_events(t: ReplayTurn, since: int) -> dict[str, int]:
    """What a live run would have recorded as events at this call (OBS-2), kind by kind: the
    stand-ins stored by the maintenance before it, and the engine's actions new since seq
    ``since`` (the previous call's last entry), as the turn service's commit records them."""
    from ..compaction import stored_kind
    from ..turns import assembly_events

    counts: dict[str, int] = {}
    for record in t.made:
        kind = stored_kind(record)
        counts[kind] = counts.get(kind, 0) + 1
    if t.assembly is not None:
        for body in assembly_events(t.assembly, since, at_seq=t.seq):
            kind = str(body["kind"])
            counts[kind] = counts.get(kind, 0) + int(body["count"])
    return counts


def _turn_dict(t: ReplayTurn, events: dict[str, int]) -> dict[str, Any]:
    from ..context import action_dict

    out: dict[str, Any] = {
        "turn": t.turn,
        "seq": t.seq,
        "input_tokens": t.input_tokens,
        "full_tokens": t.full_tokens,
        "fits": t.fits,
        "actions": [action_dict(a) for a in t.actions],
        "events": events,
    }
    if t.error:
        out["error"] = t.error
    if t.assembly is not None:
        out["utilization"] = t.assembly.metrics.budget_utilization
        out["assembly_ms"] = round(t.assembly.metrics.duration_ms, 3)
    return out


def _summary(
    turns: list[ReplayTurn], budget: Budget, events: list[dict[str, int]]
) -> dict[str, Any]:
    done: dict[str, int] = {}
    for counts in events:
        for kind, n in counts.items():
            done[kind] = done.get(kind, 0) + n
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
        "events": done,
    }


def plot_marks(turns: list[dict[str, Any]]) -> dict[str, list[int]]:
    """The calls before which a stand-in was stored, by event kind (only kinds that happened:
    a plot's legend names nothing that is not drawn)."""
    from ..compaction import CHECKPOINTED, CONDENSED, PIPELINE_SUMMARIZED, SUMMARIZED

    stored = (CHECKPOINTED, PIPELINE_SUMMARIZED, SUMMARIZED, CONDENSED)
    marks: dict[str, list[int]] = {}
    for t in turns:
        for kind in t["events"]:
            if kind in stored or kind.startswith("stored_"):
                marks.setdefault(kind, []).append(int(t["turn"]))
    return marks


def _plot(
    turns: list[ReplayTurn],
    marks: dict[str, list[int]],
    budget: Budget,
    path: Path,
    title: str,
    engine: str = "limit",
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [t.turn for t in turns]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    top.plot(xs, [t.full_tokens for t in turns], label="full history (unmanaged)", color="grey")
    top.plot(xs, [t.input_tokens for t in turns], label=f"comal {engine}", color="tab:blue")
    top.axhline(budget.input_limit, color="tab:red", linestyle="--", label="input limit")
    colors = ("tab:green", "tab:purple", "tab:orange", "tab:brown")
    for (kind, at), color in zip(sorted(marks.items()), colors * len(marks), strict=False):
        for i, turn in enumerate(at):
            top.axvline(turn, color=color, alpha=0.3, label=f"{kind} (stored)" if i == 0 else None)
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
    bottom.set_xlabel("model call")
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
        _missing_file(target)
        dumps = None if dump is None else Output.prepare(dump, "--dump", folder=True)
        drawn = None if plot is None else Output.prepare(plot, "--plot")
    with coded_errors(as_json), ledger(create=Path(target).is_file()) as led:
        scope = _session_for(led, target)
        entries = list(led.iter_entries(scope))
        plan = _replay_plan(led, scope, Flags(model=model, context_window=context_window,
                                              engine=engine or None))  # fmt: skip
        turns: list[ReplayTurn] = []
        rows: list[dict[str, Any]] = []
        replayed = replay(
            entries, scope.session, plan.budget, plan.config, engine=plan.engine,
            system=plan.system, system_at=plan.system_at, stored=led.summaries(scope),
        )  # fmt: skip
        since = -1
        for t in replayed:
            turns.append(t)
            rows.append(_turn_dict(t, turn_events(t, since)))
            since = t.view.end_seq - 1 if t.view is not None else since
            if as_json:
                emit_json(rows[-1])
            if dumps is not None and t.assembly is not None:
                body = plan.request(t.assembly, t.turn)
                text = json.dumps(body, ensure_ascii=False, indent=1)
                with dumps.writing() as folder:
                    (folder / f"turn-{t.turn:04d}.json").write_text(text, encoding="utf-8")
    budget = plan.budget
    summary = _summary(turns, budget, [r["events"] for r in rows])
    summary |= {"session": scope.session, "engine": plan.engine.name}
    if drawn is not None:
        title = f"{scope.session[:8]} at {budget.window:,} tokens"
        with coded_errors(as_json), drawn.writing() as path:
            _plot(turns, plot_marks(rows), budget, path, title, plan.engine.name)
    if as_json:
        emit_json({"summary": summary})
        return
    _print_replay(turns, rows, summary, plan, scope.session)
    if plan.note:
        err.print(plan.note)
    if plot is not None:
        err.print(f"plot written to {plot}")


def _print_replay(
    turns: list[ReplayTurn],
    rows: list[dict[str, Any]],
    summary: dict[str, Any],
    plan: _ReplayPlan,
    session: str,
) -> None:
    """The replay as a table of turns and a line of totals."""
    budget = plan.budget
    table = Table(
        "turn", "full", "sent", "fits", "the engine did (new)", title=f"replay of {session}"
    )
    for t, row in zip(turns, rows, strict=True):
        did = ", ".join(f"{k}×{n}" for k, n in row["events"].items()) or (t.error or "")
        table.add_row(
            str(t.turn), f"{t.full_tokens:,}", f"{t.input_tokens:,}", "✓" if t.fits else "✗",
            escape(safe(did)),  # an error's text may quote what the model wrote
        )  # fmt: skip
    out.print(table)
    did = ", ".join(f"{k}×{n}" for k, n in summary["events"].items())
    out.print(
        f"window {budget.window:,}: sent {summary['tokens_sent']:,} tokens over "
        f"{summary['turns']} calls vs {summary['tokens_full']:,} unmanaged "
        f"(×{summary['reduction']}); over the window: {summary['over_window']} "
        f"(unmanaged: {summary['full_over_window']}); the engine ({plan.engine.name}) did: "
        + (did or "nothing, everything fit")
        + " (the events a live run records, `comal events`)",
        markup=False,
        highlight=False,
    )


@dataclass(frozen=True)
class _ReplayPlan:
    engine: Engine
    config: BaseModel
    budget: Budget
    system: tuple[Message, ...]
    proposer: Proposer | None
    note: str | None
    # The instructions each request carried, from the session's events (DRV-1): (seq, them).
    recorded: tuple[tuple[int, Instructions], ...] = ()

    def system_at(self, seq: int) -> tuple[tuple[Message, ...], Budget]:
        """The system prompt and budget of the request that wrote entry ``seq``: the agent's
        base prompt with the instructions recorded as in effect then."""
        if self.proposer is None:
            return self.system, self.budget
        from ..agent import Instructions

        held = [i for at, i in self.recorded if at <= seq]
        self.proposer.use_instructions(held[-1] if held else Instructions())
        return (self.proposer.system_message,), self.proposer.budget()

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
    from ..agent import Runtime, recorded_instructions, window_note
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
            tuple(recorded_instructions(led, scope)),
        )  # fmt: skip
    budget = _budget(flags.model, flags.context_window)
    return _ReplayPlan(
        engine, settings.engine, budget, (), None, window_note(flags.model, flags.context_window)
    )
