"""Ledger commands: sessions, show, export, search, events, verify.

Everything printed from the ledger goes through :func:`comal.safe_text.safe` (or JSON, which
escapes control characters itself): the ledger keeps the exact bytes, the terminal sees them
escaped.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from ..ledger import Fault, LedgerBackend, Scope, SearchHit, SessionInfo, VerifyReport
    from ..messages import Message
from ..errors import UserError
from ..safe_text import encodable, safe
from ._common import JsonOpt, coded_errors, emit_json, err, ledger, no_ledger_yet, out

app = typer.Typer()


def _session_dict(s: SessionInfo, saved: float | None = None) -> dict[str, Any]:
    return {
        "session": s.id,
        "tenant": s.tenant,
        "agent": s.agent,
        "parent": s.parent,
        "entries": s.entries,
        "tokens": s.tokens,
        "status": s.status,
        "title": s.title,
        "source": s.source,
        "started": s.created_at,
        "requests": s.requests,
        "savedVsUncached": saved,
    }


@app.command()
def sessions(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    limit: Annotated[
        int | None, typer.Option(help="Sessions a page (default 20).", min=1, show_default=False)
    ] = None,
    page: Annotated[
        int | None, typer.Option(help="Which page (1: the newest).", min=1, show_default=False)
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only sessions started since: 2025-01-31, 2025-01-31T12:00Z, 12h, 7d."),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every session, unpaged.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List sessions newest first, a page at a time (20; --limit, --page, --since, --all): id,
    started (UTC), agent, tokens, status (active only while a live process holds the session;
    else interrupted, crashed, idle or finished), title; on a wide terminal also tenant, entries and
    what prompt caching saved against no caching at list prices (savedVsUncached; — when
    unknown). A work step's child session is listed under its parent (└). What the page left
    out is said below it (on stderr with --json).

    Example: comal sessions --since 7d --limit 50
    """
    from ..agent._liveness import liveness
    from ._listing import hint, listing, table, width
    from ._tree import in_tree_order

    with coded_errors(as_json):
        chosen = listing(limit, page, every, since)
        fresh = no_ledger_yet()
        if fresh is not None:  # nothing written yet: an empty list, not an error
            if as_json:
                emit_json([])
            else:
                out.print(
                    escape(
                        f"no sessions yet: the ledger {fresh} is created by the first "
                        "comal -p, comal import or comal serve"
                    )
                )
            return
        with ledger() as led:
            found = led.session_page(
                tenant=tenant,
                agent=agent,
                since=chosen.since,
                limit=chosen.limit,
                offset=chosen.offset,
            )
            # Whether each is alive, said as every surface says it (comal.agent.liveness).
            rows = [replace(s, status=liveness(led, s)) for s in found.sessions]
    # CCH-2: what prompt caching saved at list prices, priced once per request when recorded.
    saved = {s.id: None if s.saved_usd is None else round(s.saved_usd, 6) for s in rows}
    said = hint(found, chosen)
    if as_json:
        emit_json([_session_dict(s, saved[s.id]) for s in rows])
        if said:
            err.print(escape(said), style="dim")
        return
    if not found.total:
        out.print("no sessions" + (" started since then" if since else ""))
        return
    columns = width()
    out.print(table(in_tree_order(rows), saved, columns), width=columns)
    if said:
        out.print(escape(said), style="dim", width=columns)


def _preview(msg: Message, width: int = 160) -> str:
    """One line: what was said (a prompt's own words, not its preamble), then the calls, or the
    output; each once."""
    from ..messages import user_words

    result = msg.tool_result
    if result is not None:
        flag = " [error]" if result.is_error else ""
        return safe(f"← {result.call_id}{flag}: {result.text[:width]}".replace("\n", "⏎ "))
    # A checkpoint or a summary holds no text part: its text is what it says.
    words = user_words(msg)[0] or ("" if msg.tool_calls else msg.text)
    bits = [words[:width]] if words or not msg.tool_calls else []
    bits += [f"→ {call.name}({call.arguments[:80]})" for call in msg.tool_calls]
    return safe(" ".join(bits).replace("\n", "⏎ "))


@app.command()
def show(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    tail: Annotated[int | None, typer.Option(help="Only the last N entries.", min=1)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a session's entries (or the last N), one line each; then its board, its work
    steps as a tree (each child session with its outcome) and its drafts.

    Example: comal show 3f2a --tail 20
    """
    from ..messages import message_to_dict
    from ._tree import work_lines

    with coded_errors(as_json), ledger() as led:
        scope = led.resolve(session)
        entries = led.tail(scope, n=tail) if tail else led.entries(scope)
        records = _stored_outputs(led, scope)
        judged = _judgments(led, scope)
        work = [] if as_json else work_lines(led, scope)
    rows = []
    for e in entries:
        row: dict[str, Any] = {
            # "entry", as the table's column, search --json and comal evidence --entry name it
            "entry": e.id,
            "seq": e.seq,
            "step": e.step,
            "role": e.role,
            "tokens": e.tokens,
            "digest": e.digest,
            "output_digest": e.output_digest,
            "message": message_to_dict(e.message),
        }
        result = e.message.tool_result
        if result is not None and result.call_id in records:
            row["record"] = records[result.call_id]
        if result is not None and result.call_id in judged:
            row["judgment"] = judged[result.call_id]
        rows.append(row)
    if as_json:
        emit_json(rows)
        return
    table = Table("entry", "seq", "step", "role", "tokens", "content", show_lines=False)
    for e, row in zip(entries, rows, strict=True):
        content = escape(_preview(e.message))
        human = row.get("judgment", {}).get("approval")
        if human:  # a human's decision reads as theirs, never as the mode that asked them
            content = escape(f"[{safe(row['judgment']['label'])}] ") + content
        if "record" in row:
            content = escape(f"[whole output: record {row['record']}] ") + content
        table.add_row(str(e.id), str(e.seq), str(e.step), e.role, str(e.tokens), content)
    table.caption = (
        f"read any output exactly: comal evidence {scope.session[:8]} --entry ENTRY, or "
        "--record N for an output cut at write time"
    )
    out.print(table)
    for line in work:
        out.print(escape(safe(line)))


def _judgments(led: LedgerBackend, scope: Scope) -> dict[str, dict[str, Any]]:
    """Each receipted call's judgment with its label, by call id (the latest receipt)."""
    from .._labels import judgment_label

    found: dict[str, dict[str, Any]] = {}
    for rec in led.records(scope, "receipt"):
        judgment = rec.body.get("judgment")
        if isinstance(judgment, dict):
            label = judgment_label(judgment)
            found[str(rec.body.get("call_id"))] = {**judgment, "label": label}
    return found


def _stored_outputs(led: LedgerBackend, scope: Scope) -> dict[str, int]:
    """The record each output the write-time guard cut was stored whole in, by call id."""
    found: dict[str, int] = {}
    # comal.ops.OUTPUT_KIND, spelled here: importing the house would double `show`'s start-up.
    for rec in led.records(scope, "event", kinds=("output",)):
        found.setdefault(str(rec.body.get("call_id")), rec.id)
    return found


def _hit_dict(scope: Scope, hit: SearchHit) -> dict[str, Any]:
    return {
        "session": scope.session,
        "entry": hit.entry_id,
        "seq": hit.seq,
        "role": hit.role,
        "snippet": hit.snippet,
        "marks": [list(m) for m in hit.marks],  # each match in the snippet: [start, end)
    }


def _marked(hit: SearchHit) -> Text:
    """The snippet with each match between ⟦ ⟧ (and bold where the terminal shows it), so it
    reads in a pipe or a log too; the text around it escaped."""
    shown, at = Text(), 0
    for start, end in hit.marks:
        shown.append(safe(hit.snippet[at:start]))
        shown.append("⟦" + safe(hit.snippet[start:end]) + "⟧", style="bold")
        at = end
    shown.append(safe(hit.snippet[at:]))
    return shown


@app.command()
def search(
    query: Annotated[
        str, typer.Argument(help="Text to find, as written (or --fts syntax, or a --regex).")
    ],
    session: Annotated[
        str | None, typer.Option(help="Only this session (a unique prefix is enough).")
    ] = None,
    fts: Annotated[
        bool,
        typer.Option(
            "--fts", help='QUERY is FTS5 syntax: AND, OR, NOT, "phrases", prefix*, NEAR().'
        ),
    ] = False,
    regex: Annotated[
        bool, typer.Option("--regex", help="QUERY is a regular expression (RE2).")
    ] = False,
    limit: Annotated[int, typer.Option(help="At most this many hits.", min=1, max=1000)] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Search the ledger's messages and tool outputs for text as written (case aside, any white
    space for white space, whole words at its ends): `django.setup()` finds django.setup(), not
    "django setup". Each match is shown between ⟦ ⟧. --fts reads the query as FTS5 syntax,
    --regex as a regular expression.

    Example: comal search "ModuleNotFoundError" --session 3f2a
    """
    hits: list[tuple[Scope, SearchHit]] = []
    with coded_errors(as_json), ledger() as led:
        if not query.strip():
            raise UserError("give something to search for")
        if fts and regex:
            raise UserError("--fts and --regex read the query differently: give one of them")
        scopes = [led.resolve(session)] if session else [s.scope for s in led.sessions()]
        for scope in scopes:
            found = led.search(scope, query, regex=regex, fts=fts, limit=limit - len(hits))
            for hit in found:
                hits.append((scope, hit))
            if len(hits) >= limit:
                break
    if as_json:
        emit_json([_hit_dict(scope, hit) for scope, hit in hits])
        return
    table = Table("session", "entry", "seq", "role", "snippet", title=f"{len(hits)} hit(s)")
    for scope, hit in hits:
        table.add_row(scope.session[:8], str(hit.entry_id), str(hit.seq), hit.role, _marked(hit))
    out.print(table)


@app.command()
def events(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    kind: Annotated[
        list[str] | None, typer.Option(help="Only events of this kind (repeatable).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List a session's events (OBS-2): what the engine did (referenced, checkpointed,
    bounded, evicted, summarized; the stand-ins maintenance and /compact stored:
    checkpointed, pipeline_summarized, dag_summarized, dag_condensed), recoveries, queued
    compactions, added rules. With --json, one JSON object per line.

    Example: comal events 3f2a --kind checkpointed
    """
    with coded_errors(as_json), ledger() as led:
        scope = led.resolve(session)
        rows = led.records(scope, "event", kinds=tuple(kind) if kind else None)
    if as_json:
        for r in rows:
            emit_json({"id": r.id, "kind": r.kind, "at": r.created_at, "body": r.body})
        return
    table = Table("id", "at", "kind", "detail", title=f"events of {scope.session}")
    for r in rows:
        detail = json.dumps(r.body, ensure_ascii=False)
        detail = detail if len(detail) <= 120 else detail[:119] + "…"
        table.add_row(str(r.id), r.created_at[:19], r.kind, escape(safe(detail)))
    out.print(table)


@app.command()
def rename(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    title: Annotated[str, typer.Argument(help="The new title.")],
    as_json: JsonOpt = False,
) -> None:
    """Give a session a new title (what `comal sessions` shows).

    Example: comal rename 3f2a "parser fix, second try"
    """
    with coded_errors(as_json), ledger() as led:
        scope = led.resolve(session)
        led.rename_session(scope, title)
    if as_json:
        emit_json({"session": scope.session, "title": title})
    else:
        out.print(escape(f"{scope.session}: {safe(title)}"))


@app.command()
def rm(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    children: Annotated[
        bool, typer.Option("--children", help="Also delete its child sessions (sub-agents).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete a session and everything stored for it: the only deletion comal has. It asks
    first (or --yes; answered no, it says nothing was removed and exits 0), waits for no agent
    (a session an agent holds is refused), and leaves a tombstone naming who deleted what and
    when, so `comal verify` stays clean.

    Example: comal rm 3f2a --yes
    """
    from ..agent import lock_session

    with coded_errors(as_json), ledger() as led:
        scope = led.resolve(session)
        info = led.session(scope)
        if not yes:
            what = f"{scope.session} ({info.entries if info else 0:,} entries"
            what += f", {safe(info.title)!r})" if info and info.title else ")"
            if not typer.confirm(f"delete session {what}?", default=False, err=True):
                # Answered no: nothing went wrong, and the person is told nothing changed.
                if as_json:
                    emit_json({"session": scope.session, "deleted": False})
                else:
                    out.print(f"nothing removed: {scope.session} is kept")
                return
        with lock_session(led, scope):
            gone = led.delete_session(scope, by=_user(), children=children)
    if as_json:
        emit_json(
            {
                "session": gone.session,
                "deleted_at": gone.deleted_at,
                "by": gone.deleted_by,
                "entries": gone.entries,
                "rows": dict(gone.rows),
                "digest": gone.digest,
            }
        )
    else:
        out.print(f"deleted {gone.session}: {gone.entries:,} entries; tombstone {gone.id}")


def _user() -> str:
    import getpass

    try:
        return f"cli:{getpass.getuser() or 'user'}"
    except (KeyError, OSError):
        return "cli:user"


_ACCEPT_HELP = (
    "Accept a ledger older than this machine last saw it here (restored from a backup on "
    "purpose) when nothing else is wrong with it, and record that in the ledger."
)


@app.command("verify")
def verify_cmd(
    as_json: JsonOpt = False,
    accept_restore: Annotated[bool, typer.Option("--accept-restore", help=_ACCEPT_HELP)] = False,
) -> None:
    """Re-hash every stored entry and check every step is whole; exit 1 on any fault. A
    ledger that does not open (a file cut short) is reported too: what its file and SQLite's
    own check say, and each table read up to its first unreadable page.

    Example: comal verify --json
    """
    from ..ledger import LedgerCorrupt, verify
    from ..ledger._salvage import verify_unopened
    from ._common import ledger_target

    accepted = None
    older: list[Fault] = []
    with coded_errors(as_json):
        try:
            with ledger(strict=False) as led:
                report = verify(led)
                older = [f for f in report.faults if f.kind == "rolled-back"]
                if accept_restore and older and len(older) == len(report.faults):
                    accepted = led.accept_restore(by=_user())
                    report = verify(led)
        except LedgerCorrupt as exc:  # verify is how one finds where: report, do not stop
            report = verify_unopened(ledger_target(), exc)
    if as_json:
        found = report.as_dict(checks=True)
        if accept_restore:
            found["restore_accepted"] = None if accepted is None else accepted.id
        emit_json(found)
    else:
        if accepted is not None:
            out.print(
                f"restore accepted (ledger event {accepted.id}): this machine takes the ledger "
                "as it is now"
            )
        elif accept_restore:
            why = "other faults must be fixed first" if older else "it is not older than seen"
            out.print(escape(f"no restore accepted: {why}"))
        _say_report(report)
    if not report.ok:
        raise typer.Exit(1)


def _say_report(report: VerifyReport) -> None:
    status = "[green]ok[/]" if report.ok else f"[red]{len(report.faults)} fault(s)[/]"
    rows = sum(report.rows.values())
    out.print(f"verified {report.entries:,} entries ({rows:,} rows in all): {status}")
    out.print(escape(f"  database: {report.database}"))
    out.print(escape(f"  seals: {report.sealing}"))
    for f in report.faults[:50]:
        where = [f"session {f.session}"] if f.session else []
        # A session's own row is the session: its id is said once.
        if f.row is not None and str(f.row) != f.session:
            where.append(f"{f.table} row {f.row}")
        elif not f.session or f.table != "sessions":
            where.append(f.table)
        if f.seq is not None and f.seq >= 0:
            where.append(f"seq {f.seq}")
        line = f"  {' '.join(where)}: {f.kind}: {safe(f.detail)}"
        out.print(escape(str(encodable(line))))
    if len(report.faults) > 50:
        out.print(f"  … {len(report.faults) - 50:,} more (comal verify --json lists them all)")
    if report.paused:
        paused = str(encodable(", ".join(report.paused)))
        out.print(escape(f"  paused (ending in open tool calls): {paused}"))
