"""How the TUI shows a session: what the person and the model said, what the model did, what
came back; each once.

A stored prompt starts with the house's preamble (date, workspace, sender: CCH-1); it is shown
as the prompt's metadata, never as the person's words (:func:`comal.messages.user_words`). An
assistant message is its text, then one line per call (``Message.text`` would list the calls
inside the text as well). Everything the model or a tool wrote is escaped first.
"""

from __future__ import annotations

import json

from rich.text import Text as RichText
from textual.widget import Widget
from textual.widgets import Collapsible, Static

from ..ledger import Entry
from ..messages import Role, preamble_lines, user_words
from ..safe_text import safe

__all__ = ["call_line", "entry_widgets", "note", "output_widget", "said"]

_OUTPUT_PREVIEW = 4_000
_ARGS_SHOWN = 300


def said(who: str, text: str, *, classes: str = "") -> Static:
    return Static(RichText(safe(f"{who}: {text[:_OUTPUT_PREVIEW]}")), classes=classes)


def note(text: str, *, classes: str = "note") -> Static:
    return Static(RichText(safe(f"· {text}"), style="dim"), classes=classes)


def call_line(name: str, arguments: str) -> Static:
    """One proposed call: a shell command as the command, anything else as its arguments."""
    try:
        args = json.loads(arguments)
    except ValueError:
        args = None
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        shown = f"→ {name}  $ {args['command']}"
    elif isinstance(args, dict) and isinstance(args.get("path"), str):
        shown = f"→ {name}({args['path']})"
    else:
        shown = f"→ {name} {arguments[:_ARGS_SHOWN]}"
    return Static(RichText(safe(shown), style="cyan"), classes="call")


def output_widget(name: str, text: str) -> Collapsible:
    """A tool's output, collapsed: its title says what it is; expand to read it."""
    lines = text.count("\n") + 1
    shown = text if len(text) <= _OUTPUT_PREVIEW else text[:_OUTPUT_PREVIEW] + "\n…"
    title = safe(f"{name or 'tool'} output ({lines} line{'s' if lines != 1 else ''})")[:120]
    return Collapsible(Static(RichText(safe(shown))), title=title, collapsed=True)


def entry_widgets(entry: Entry, tools: dict[str, str]) -> list[Widget]:
    """A stored entry as the transcript shows it; ``tools`` maps the call ids seen so far to
    their operation (a tool result names its call, not always its tool)."""
    message = entry.message
    result = message.tool_result
    if result is not None:
        return [output_widget(result.name or tools.get(result.call_id, "tool"), result.text)]
    words, _ = user_words(message)
    out: list[Widget] = []
    if message.role is Role.USER:
        context = preamble_lines(message)
        if context:
            out.append(note(" · ".join(context), classes="note context"))
        out.append(said("you", words or message.text))
        return out
    if words:
        out.append(said("comal" if message.role is Role.ASSISTANT else entry.role, words))
    elif not message.tool_calls and message.text:  # a checkpoint, a summary
        out.append(said(entry.role, message.text))
    for call in message.tool_calls:
        tools[call.id] = call.name
        out.append(call_line(call.name, call.arguments))
    return out
