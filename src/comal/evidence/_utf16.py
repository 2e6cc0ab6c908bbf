"""UTF-16 code-unit arithmetic on Python strings (EVI-2 counts offsets in UTF-16 units).

Python indexes strings by code point; models and JavaScript hosts count UTF-16 units, where an
astral-plane character (most emoji) is two units, a surrogate pair. Every offset the evidence
reader accepts or returns is in units, and a page boundary never falls between the two halves of
a pair, so each page decodes on its own.
"""

from __future__ import annotations

import re

__all__ = [
    "is_pair_split",
    "line_count",
    "to_utf16_offsets",
    "utf16_encode",
    "utf16_len",
]

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def utf16_encode(text: str) -> bytes:
    # surrogatepass: a stored output may hold a lone surrogate (JSON allows it); it is one unit.
    return text.encode("utf-16-le", "surrogatepass")


def utf16_len(text: str) -> int:
    # One C-level encode is several times faster than counting astral characters by regex.
    return len(utf16_encode(text)) // 2


def _unit(data: bytes, index: int) -> int:
    return int.from_bytes(data[2 * index : 2 * index + 2], "little")


def is_pair_split(data: bytes, index: int) -> bool:
    """Whether a boundary at unit ``index`` of UTF-16-LE ``data`` cuts a surrogate pair."""
    if index <= 0 or index >= len(data) // 2:
        return False
    return 0xD800 <= _unit(data, index - 1) <= 0xDBFF and 0xDC00 <= _unit(data, index) <= 0xDFFF


def to_utf16_offsets(text: str, indices: list[int]) -> tuple[int, ...]:
    """UTF-16 offsets of ascending code-point ``indices`` in ``text``, in one pass."""
    out: list[int] = []
    astral = 0
    prev = 0
    for i in indices:
        astral += len(_ASTRAL.findall(text, prev, i))
        prev = i
        out.append(i + astral)
    return tuple(out)


def line_count(text: str) -> int:
    """Lines as an editor shows them: a final line without a newline still counts."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)
