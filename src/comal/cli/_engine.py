"""Engine commands: state, compact, evidence (LIM-7, EVI-2); ``replay`` is in :mod:`._replay`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..safe_text import safe
from ._common import (
    EngineOpt,
    JsonOpt,
    ModelOpt,
    WindowOpt,
    coded_errors,
    emit_json,
    err,
    ledger,
    out,
)

app = typer.Typer()


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
        # Stored output is a tool's or a model's: escaped here as everywhere it is shown;
        # --json has the exact text (the same value, such characters as JSON escapes).
        typer.echo(safe(page.text), nl=False)
        err.print(
            f"\n[{page.target} {page.entry_id}: {page.offset}..{page.end} of {page.total_utf16} "
            f"UTF-16 units; sha256 {page.digest}]"
            + (f" next: {page.next_call}" if page.next_call else ""),
            markup=False,
        )
