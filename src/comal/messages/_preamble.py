"""The per-prompt preamble (CCH-1) and the user's own words beside it.

The agent stores each prompt as one user message whose first text part is a preamble — the
date, the workspace, the sender, between ``<context>`` and ``</context>`` lines — and whose
next part is the prompt as typed. The preamble is context the house added, never something
the user said: whatever presents a user's requests (a checkpoint's work state, a summary's
quote of the request) reads them with :func:`user_words`, and the agent writes the preamble
with :func:`preamble_text`, so both sides keep to one spelling.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ._parts import Message, Role, Text

__all__ = [
    "PREAMBLE_CLOSE",
    "PREAMBLE_OPEN",
    "first_words",
    "is_preamble",
    "preamble_lines",
    "preamble_text",
    "user_words",
]

PREAMBLE_OPEN = "<context>"
PREAMBLE_CLOSE = "</context>"


def preamble_text(lines: Sequence[str]) -> str:
    """The preamble part holding ``lines``."""
    return "\n".join([PREAMBLE_OPEN, *lines, PREAMBLE_CLOSE])


def is_preamble(text: str) -> bool:
    return text.startswith(PREAMBLE_OPEN + "\n") and text.endswith("\n" + PREAMBLE_CLOSE)


def user_words(message: Message) -> tuple[str, int]:
    """The text the user wrote in ``message`` and where it starts in the message's whole text
    (its text parts joined by newlines: the evidence field ``text``), in characters.

    Only a first part that is a preamble *and* is followed by another text part is left out:
    a message that is nothing but such a block (an imported transcript's, say) is its words.
    """
    texts = [p.text for p in message.parts if isinstance(p, Text)]
    if len(texts) >= 2 and is_preamble(texts[0]):
        return "\n".join(texts[1:]), len(texts[0]) + 1
    return "\n".join(texts), 0


def preamble_lines(message: Message) -> tuple[str, ...]:
    """The lines of the preamble :func:`user_words` leaves out (``date: …``, ``sender: …``),
    for a surface to show as the prompt's metadata; empty when there is none."""
    _, start = user_words(message)
    if not start:
        return ()
    first = next(p.text for p in message.parts if isinstance(p, Text))
    return tuple(first.split("\n")[1:-1])


_OPENING = re.compile(r"<([A-Za-z][\w.:-]*)[^>]*>")


def first_words(messages: Iterable[Message], width: int = 80) -> str | None:
    """What a session is about, for a listing's title: the first line a user wrote, outside
    tagged blocks (a preamble, ``<system-reminder>``, ``<command-name>``), its spaces collapsed
    and cut to ``width`` with ``…``; None when no user wrote a line."""
    for message in messages:
        if message.role is Role.USER:
            line = _untagged_line(user_words(message)[0])
            if line:
                return line if len(line) <= width else line[: width - 1] + "…"
    return None


def _untagged_line(text: str) -> str | None:
    inside: str | None = None
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if inside is not None:
            inside = None if f"</{inside}>" in line else inside
            continue
        opening = _OPENING.match(line)
        if opening is not None:
            name = opening.group(1)
            inside = None if f"</{name}>" in line or line.endswith("/>") else name
            continue
        if line and not line.startswith("<"):
            return line
    return None
