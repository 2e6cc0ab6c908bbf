"""``comal export``: a session as a provider's message list (JSON) or as Markdown to read.

What the ledger holds is printed through :func:`comal.safe_text.safe` or as JSON escapes: the
ledger keeps the exact bytes, the terminal sees them escaped.
"""

from __future__ import annotations

import json
import re
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


def _fenced(text: str, info: str = "text") -> list[str]:
    """``text`` as a fenced block: read as it is, never as Markdown or HTML (a heading, an
    image that loads a URL, a tag), and no line of it can close the fence."""
    body = safe(text)
    fence = _fence(body)
    return [fence + info, body, fence, ""]


# What can open markup inside a line: emphasis, code, links and images, HTML and entities,
# tables, a heading's closing #, and the escape itself.
_MARKUP = re.compile(r"([\\`*_\[\]<>!&|~#])")


def _inline(text: str) -> str:
    """Text from the ledger inside a line of Markdown (a title, a name): each character that
    could open markup backslash-escaped, as CommonMark allows, so it stays text."""
    return _MARKUP.sub(r"\\\1", " ".join(safe(text).split()))


def markdown(info: SessionInfo | None, messages: list[Message]) -> str:
    """A session to read: each message under a heading, every body (what was said, a call's
    arguments, an output) in a code fence no body can close, names and the title escaped, so
    what the ledger holds is shown and never rendered; control characters escaped."""
    from ..messages import preamble_lines, user_words

    title = (info.title if info is not None else None) or "session"
    lines = [f"# {_inline(title)}", ""]
    if info is not None:
        where = f"{info.id} · {info.tenant}/{info.agent} · {info.created_at}"
        lines += [f"session {_inline(where)}", ""]
    for message in messages:
        lines += [f"## {message.role.value}", ""]
        result = message.tool_result
        if result is not None:
            flag = " (error)" if result.is_error else ""
            # A call id is the model's too.
            lines += [f"output of {_inline(result.call_id)}{flag}:", "", *_fenced(result.text)]
            continue
        words = user_words(message)[0]
        context = preamble_lines(message)
        if context:  # the house's preamble: when and where, not the user's words
            lines += [f"_{_inline(' · '.join(context))}_", ""]
        if words:
            lines += _fenced(words)
        elif not message.tool_calls and message.text:  # a checkpoint, a summary
            lines += _fenced(message.text)
        for call in message.tool_calls:
            head = f"call {_inline(call.id)} **{_inline(call.name)}**:"
            lines += [head, "", *_fenced(call.arguments, "json")]
    return "\n".join(lines)
