"""``comal export``: a session as a provider's message list (JSON) or as Markdown to read.

What the ledger holds is printed through :func:`comal.safe_text.safe` or as JSON escapes: the
ledger keeps the exact bytes, the terminal sees them escaped.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from ..ledger import SessionInfo
    from ..messages import Message
    from ..messages.wire import WireProtocol
from ..errors import UserError
from ..safe_text import safe, safe_json
from ._common import JsonOpt, coded_errors, ledger

app = typer.Typer()


class ExportFormatError(UserError):
    """``comal export --format`` names no format it writes; the message lists those it does."""

    code = "EXPORT_FORMAT"


@app.command()
def export(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="openai | openai-responses | anthropic | markdown (default: the format a "
            "session recorded by comal serve came in, else openai)",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the whole session as a provider's message list (JSON; tool outputs exact), or as
    Markdown to read. A session comal serve recorded exports in its client's own form (INT-2):
    Anthropic system messages inside the conversation stay where they came.

    Example: comal export 3f2a --format anthropic > session.json
    """
    with coded_errors(as_json):
        known = [*_exports(), "markdown"]
        if format is not None and format not in known:  # said before any ledger is opened
            raise ExportFormatError(
                f"--format {format!r} is not an export format; give one of: {', '.join(known)}"
            )
        with ledger() as led:
            scope = led.resolve(session)
            info = led.session(scope)
            messages = [e.message for e in led.iter_entries(scope)]
            # Inside coded_errors: a session a format cannot carry is a coded error.
            chosen = format or _came_in(info)
            text = _exported(info, messages, chosen, as_json)
    typer.echo(text, nl=chosen != "markdown")


def _exports() -> dict[str, WireProtocol]:
    """The export formats: every wire protocol that writes sessions, by its format name."""
    from ..messages.wire import wire_protocols

    return {p.export_name: p for p in wire_protocols().values() if p.export_name and p.export}


def _came_in(info: SessionInfo | None) -> str:
    recorded = info.meta.get("protocol") if info is not None and info.source == "proxy" else None
    found = next((f for f, p in _exports().items() if p.name == recorded), None)
    return found or "openai"


def _exported(info: SessionInfo | None, messages: list[Message], format: str, as_json: bool) -> str:
    if format == "markdown":
        return markdown(info, messages)
    write = _exports()[format].export
    assert write is not None
    # What the proxy recorded holds no top-level system prompt: each system message it stored
    # came inside the conversation, and goes back there.
    payload = write(messages, info is not None and info.source == "proxy")
    # The same JSON value with what a terminal acts on written as escapes (issue 30).
    return safe_json(json.dumps(payload, ensure_ascii=False, indent=None if as_json else 1))


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def markdown(info: SessionInfo | None, messages: list[Message]) -> str:
    """A session to read: each message under a heading, calls and outputs in code fences
    (fenced so no output can close them), control characters escaped."""
    from ..messages import preamble_lines, user_words

    title = (info.title if info is not None else None) or "session"
    lines = [f"# {safe(title)}", ""]
    if info is not None:
        lines += [f"session `{info.id}` · {info.tenant}/{info.agent} · {info.created_at}", ""]
    for message in messages:
        lines.append(f"## {message.role.value}")
        lines.append("")
        result = message.tool_result
        if result is not None:
            body = safe(result.text)
            fence = _fence(body)
            flag = " (error)" if result.is_error else ""
            # A call id is the model's too.
            lines += [f"output of `{safe(result.call_id)}`{flag}:", "", fence, body, fence, ""]
            continue
        words = user_words(message)[0]
        context = preamble_lines(message)
        if context:  # the house's preamble: when and where, not the user's words
            lines += [f"_{safe(' · '.join(context))}_", ""]
        if words:
            lines += [safe(words), ""]
        elif not message.tool_calls and message.text:  # a checkpoint, a summary
            lines += [safe(message.text), ""]
        for call in message.tool_calls:
            body = safe(call.arguments)
            fence = _fence(body)
            head = f"call `{safe(call.id)}` **{safe(call.name)}**:"
            lines += [head, "", fence + "json", body, fence]
            lines.append("")
    return "\n".join(lines)
