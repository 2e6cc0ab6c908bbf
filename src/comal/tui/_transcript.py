"""How the TUI shows a session: the lines every surface reads from the ledger
(:func:`comal.agent.entry_lines`: what the person and the model said, what the model did, what
came back; each once), as widgets. Everything the model or a tool wrote is escaped first.
"""

from __future__ import annotations

from rich.text import Text as RichText
from textual.widget import Widget
from textual.widgets import Collapsible, Static

from ..agent._transcript import Line, call_shown, entry_lines
from ..ledger import Entry
from ..safe_text import safe

__all__ = [
    "LIVE_TAIL",
    "call_line",
    "entry_widgets",
    "live_output",
    "live_text",
    "note",
    "output_widget",
    "said",
]

_OUTPUT_PREVIEW = 4_000
# How much of a running call's output the TUI shows as it comes: its last characters.
LIVE_TAIL = 4_000


def said(who: str, text: str, *, classes: str = "") -> Static:
    return Static(RichText(safe(f"{who}: {text[:_OUTPUT_PREVIEW]}")), classes=classes)


def note(text: str, *, classes: str = "note") -> Static:
    return Static(RichText(safe(f"· {text}"), style="dim"), classes=classes)


def call_line(name: str, arguments: str) -> Static:
    """One proposed call: a shell command as the command, anything else as its arguments."""
    return Static(RichText(safe(call_shown(name, arguments)), style="cyan"), classes="call")


def output_widget(name: str, text: str) -> Collapsible:
    """A tool's output, collapsed: its title says what it is; expand to read it."""
    lines = text.count("\n") + 1
    shown = text if len(text) <= _OUTPUT_PREVIEW else text[:_OUTPUT_PREVIEW] + "\n…"
    title = safe(f"{name or 'tool'} output ({lines} line{'s' if lines != 1 else ''})")[:120]
    return Collapsible(Static(RichText(safe(shown))), title=title, collapsed=True)


def live_text(text: str) -> RichText:
    """A running call's output so far: its last :data:`LIVE_TAIL` characters (its result, as
    kept, replaces it when the call ends)."""
    shown = text if len(text) <= LIVE_TAIL else "…" + text[-LIVE_TAIL:]
    return RichText(safe(shown), style="dim")


def live_output(text: str) -> Static:
    return Static(live_text(text), classes="live")


def _widget(line: Line) -> Widget:
    if line.kind == "output":
        return output_widget(line.name, line.text)
    if line.kind == "context":
        return note(line.text, classes="note context")
    if line.kind == "call":
        return call_line(line.name, line.arguments)
    return said(line.who, line.text)


def entry_widgets(entry: Entry, tools: dict[str, str]) -> list[Widget]:
    """A stored entry as the transcript shows it; ``tools`` maps the call ids seen so far to
    their operation (a tool result names its call, not always its tool)."""
    return [_widget(line) for line in entry_lines(entry, tools)]
