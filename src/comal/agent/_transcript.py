"""What a person is shown of a session, each thing once: the surfaces' common reading of the
ledger (the TUI's transcript, the web page's chat).

A stored prompt starts with the house's preamble (date, workspace, sender: CCH-1); it is said
as the prompt's context, never as the person's words (:func:`comal.messages.user_words`). An
assistant message is its text, then one line per call (``Message.text`` would list the calls
inside the text as well); a tool result is its output. Nothing here escapes text: each surface
renders it as text with control and bidi characters made visible.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..ledger import Entry, LedgerBackend, Scope
from ..messages import Role, preamble_lines, user_words

__all__ = ["Line", "board_note", "call_shown", "entry_lines"]

_ARGS_SHOWN = 300
# User messages comal writes itself, by their name.
_NOT_THE_PERSON = frozenset({"comal", "hook"})

LineKind = Literal["context", "said", "call", "output"]


@dataclass(frozen=True, slots=True)
class Line:
    """One thing the transcript shows: ``who`` said ``text`` (``said``), the prompt's context,
    a proposed call (``name``, its ``arguments`` and ``text`` as shown) or a call's output."""

    kind: LineKind
    text: str
    who: str = ""
    name: str = ""
    arguments: str = ""
    call_id: str = ""
    is_error: bool = False
    seq: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def call_shown(name: str, arguments: str) -> str:
    """One proposed call: a shell command as the command, a file call as its path, anything
    else as its arguments."""
    try:
        args = json.loads(arguments)
    except ValueError:
        args = None
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        return f"→ {name}  $ {args['command']}"
    if isinstance(args, dict) and isinstance(args.get("path"), str):
        return f"→ {name}({args['path']})"
    return f"→ {name} {arguments[:_ARGS_SHOWN]}"


def entry_lines(entry: Entry, tools: dict[str, str]) -> list[Line]:
    """A stored entry as the transcript shows it; ``tools`` maps the call ids seen so far to
    their operation (a tool result names its call, not always its tool)."""
    message = entry.message
    seq = entry.seq
    result = message.tool_result
    if result is not None:
        name = result.name or tools.get(result.call_id, "tool")
        return [
            Line(
                "output",
                result.text,
                name=name,
                call_id=result.call_id,
                is_error=result.is_error,
                seq=seq,
            )
        ]
    words, _ = user_words(message)
    out: list[Line] = []
    if message.role is Role.USER:
        context = preamble_lines(message)
        if context:
            out.append(Line("context", " · ".join(context), seq=seq))
        # What comal or a hook told the model (a failed finish, an interruption) is theirs.
        who = message.name if message.name in _NOT_THE_PERSON else "you"
        out.append(Line("said", words or message.text, who=who, seq=seq))
        return out
    if words:
        who = "comal" if message.role is Role.ASSISTANT else entry.role
        out.append(Line("said", words, who=who, seq=seq))
    elif not message.tool_calls and message.text:  # a checkpoint, a summary
        out.append(Line("said", message.text, who=entry.role, seq=seq))
    for call in message.tool_calls:
        tools[call.id] = call.name
        shown = call_shown(call.name, call.arguments)
        out.append(
            Line("call", shown, name=call.name, arguments=call.arguments, call_id=call.id, seq=seq)
        )
    return out


def board_note(ledger: LedgerBackend, scope: Scope | None) -> str:
    """The board in a status line (BRD-2): how many items are verified, done, open; ``/state``
    shows it whole. Empty when the session has no board."""
    from ..work import board_of

    if scope is None:
        return ""
    board = board_of(ledger, scope)
    if not board.items:
        return ""
    counts = board.counts
    done = counts.get("done", 0)
    left = len(board.open_items)
    return (
        f"board {counts.get('verified', 0)}/{len(board.items)} verified"
        + (f", {done} done" if done else "")
        + (f", {left} open" if left else "")
    )
