"""The readable fields of a stored message: exact strings, never re-serialised.

- ``content`` (alias ``output``): a tool result's exact text, the string whose sha256 the ledger
  stores as ``output_digest`` (text blocks joined by newlines when the tool returned several);
- ``text``: the text parts of a message joined by newlines (what the user or model wrote);
- ``arguments``: the JSON text of the message's only tool call; ``arguments[i]`` names the
  ``i``-th call (from 0) when an assistant message made several.
"""

from __future__ import annotations

import re

from ..messages import Message, Text
from ._errors import EvidenceFieldError

__all__ = ["CONTENT", "field_text", "fields_of", "message_text"]

CONTENT = "content"
_ALIASES = {"output": CONTENT}
_ARGUMENTS = re.compile(r"arguments\[(\d+)\]")


def message_text(message: Message) -> str:
    return "\n".join(p.text for p in message.parts if isinstance(p, Text))


def fields_of(message: Message) -> tuple[str, ...]:
    """Every field name :func:`field_text` accepts for ``message``, for error messages."""
    out: list[str] = []
    if message.tool_result is not None:
        out.append(CONTENT)
    if any(isinstance(p, Text) for p in message.parts):
        out.append("text")
    calls = message.tool_calls
    if len(calls) == 1:
        out.append("arguments")
    out += [f"arguments[{i}]" for i in range(len(calls))] if len(calls) > 1 else []
    return tuple(out)


def field_text(message: Message, field: str, *, entry_id: int) -> tuple[str, str]:
    """The canonical field name and its exact text; :class:`EvidenceFieldError` if absent."""
    name = _ALIASES.get(field, field)
    result = message.tool_result
    if name == CONTENT and result is not None:
        return name, result.text
    if name == "text" and any(isinstance(p, Text) for p in message.parts):
        return name, message_text(message)
    calls = message.tool_calls
    if name == "arguments" and len(calls) == 1:
        return name, calls[0].arguments
    match = _ARGUMENTS.fullmatch(name)
    if match is not None and int(match[1]) < len(calls):
        return name, calls[int(match[1])].arguments
    have = ", ".join(repr(f) for f in fields_of(message)) or "none"
    raise EvidenceFieldError(
        f"entry {entry_id} ({message.role.value} message) has no field {field!r}; "
        f"its readable fields are: {have}"
    )
