"""The text a summarizer reads and ``ctx_expand`` returns: sources rendered deterministically.

A leaf's sources are its entries, one block each, headed by a line the ledger row decides
(``### seq N · role · time``, with the tool and call id for calls and results); the text is
the message's visible text (text parts and tool output) and each tool call's exact
arguments. Reasoning is left out (it is not visible text), media are named by type and size.
A condensed node's sources are its children's bodies under headers from their rows. Body
lines that would look like a header are prefixed with a backslash, so no source can forge
the boundary of another. The same entries always render to the same bytes: the digest of
this text is stored with the summary (``sources_digest``) and checked on every expansion.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ledger import Entry, SummaryRecord
from ...messages import Media, Text, ToolResult, sha256_hex

__all__ = ["render_children", "render_entries", "sources_digest"]

_HEADER = "### "


def _escape(text: str) -> str:
    if _HEADER not in text:
        return text
    return "\n".join("\\" + line if line.startswith(_HEADER) else line for line in text.split("\n"))


def _media(result: ToolResult | None, entry: Entry) -> list[str]:
    found: list[Media] = [p for p in entry.message.parts if isinstance(p, Media)]
    if result is not None and not isinstance(result.content, str):
        found += [p for p in result.content if isinstance(p, Media)]
    return [f"[{m.mime}{f', {m.size:,} bytes' if m.size else ''}]" for m in found]


def render_entries(entries: Sequence[Entry]) -> str:
    """The sources of a leaf: ``entries`` in seq order."""
    calls: dict[str, str] = {}
    blocks: list[str] = []
    for e in entries:
        m = e.message
        result = m.tool_result
        head = f"{_HEADER}seq {e.seq} · {e.role}"
        if result is not None:
            name = result.name or calls.get(result.call_id) or "tool"
            head += f" · result of {name} ({result.call_id})"
            if result.is_error:
                head += " · error"
        head += f" · {e.created_at}"
        lines = [head]
        text = (
            result.text
            if result is not None
            else "".join(p.text for p in m.parts if isinstance(p, Text))
        )
        if text:
            lines.append(_escape(text))
        for call in m.tool_calls:
            calls[call.id] = call.name
            lines.append(f"→ call {call.name} ({call.id}): {_escape(call.arguments)}")
        lines += _media(result, e)
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def render_children(children: Sequence[SummaryRecord]) -> str:
    """The sources of a condensed node: its children's bodies, oldest first."""
    blocks = []
    for s in children:
        head = (
            f"{_HEADER}summary {s.id} · depth {s.depth} · seq {s.first_seq}..{s.last_seq} · "
            f"{s.descendant_count} messages · {s.time_range[0]} → {s.time_range[1]}"
        )
        blocks.append(f"{head}\n{_escape(s.text)}")
    return "\n".join(blocks)


def sources_digest(text: str) -> str:
    return sha256_hex(text)
