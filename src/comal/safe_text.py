"""Text from the ledger or a model made safe to print on a terminal (issue: hostile output).

The ledger keeps every byte a tool or model produced; a face that prints it must not let those
bytes act on the terminal. ESC sequences can clear the screen or rewrite what was shown, OSC 52
writes the clipboard, a carriage return overwrites the line, and bidirectional overrides
(U+202E) reorder what a reader sees, so an approval prompt could show one command and run
another. :func:`safe` renders each such character visibly (``\\x1b``, ``\\u202e``) and keeps
newlines and tabs, so the text reads as before and nothing in it is executed by the terminal.

Untrusted text placed inside a trusted frame (a summary a model wrote, under a header comal
wrote) must not imitate the frame. :func:`quote_lines` gives such text the lines a reader
sees: every character that breaks a line (CR, VT, FF, NEL, U+2028, U+2029, ...) becomes a
newline, every invisible one is escaped, and a line that would read as one of the frame's
markers, once what shows nothing is ignored, is marked as quoted. :func:`one_line` does the
same for a value that must stay on its line.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

__all__ = [
    "encodable",
    "is_safe",
    "one_line",
    "quote_lines",
    "safe",
    "safe_command",
    "safe_json",
    "visible_key",
]

# C0 controls but tab and newline, DEL, C1 controls; bidi embeddings, overrides and isolates;
# zero-width characters that hide text; line and paragraph separators; BOM; interlinear
# annotations.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """``text`` with every control, bidi and invisible character shown as an escape."""
    return _UNSAFE.sub(_escape, text)


def safe_json(dumped: str) -> str:
    """JSON text with every character :func:`safe` would escape written as a ``\\u`` escape:
    the same JSON value, nothing in it a terminal acts on. (Such characters can only be inside
    JSON strings, where the escape means the character itself.)"""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)


_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(value: object) -> object:
    """``value`` (strings, and those inside lists, tuples and dicts) with every lone surrogate —
    what a damaged byte becomes when the ledger reads invalid UTF-8 leniently — shown as the
    byte it stood for (``\\xff``), so the text can be written as UTF-8 and read back."""
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        raw = value.encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(v) for v in value]
    return value


def is_safe(text: str) -> bool:
    return _UNSAFE.search(text) is None


def safe_command(command: str) -> str:
    """A command for an approval prompt: exactly what will run, unambiguous. When it holds
    characters a terminal would act on or hide, they are escaped and the line says so."""
    shown = safe(command)
    if shown == command:
        return command
    return f"{shown}\n(this command contains control or invisible characters, shown escaped)"


# What str.splitlines() breaks on: what any reader (a terminal, a model's tokenizer) may take
# for the end of a line.
_LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
# Letters and symbols that are drawn blank.
_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e")
# Controls, format characters (zero-width, bidi, BOM), separators, combining marks and private
# use: nothing a reader sees at the start of a line.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Mn", "Me", "Co", "Cn"})
_LESS_THAN = frozenset("<\ufe64\uff1c")  # what NFKC turns into "<"


def visible_key(text: str) -> str:
    """``text`` as a reader takes it in, for comparing with a marker: what is drawn as
    nothing removed, compatibility forms folded (NFKC), case folded, leading spaces gone."""
    shown = "".join(
        c for c in text if c == "\n" or (c not in _BLANK and unicodedata.category(c) not in _HIDDEN)
    )
    return unicodedata.normalize("NFKC", shown).lstrip().casefold()


def quote_lines(
    text: str,
    starts: Sequence[str],
    *,
    anywhere: Sequence[str] = (),
    mark: str = "(quoted) ",
) -> str:
    """``text`` framed as untrusted: its line breaks made newlines, its invisible characters
    escaped (:func:`safe`), ``mark`` before every line that a reader would take to start with
    one of ``starts``, and every ``<`` written ``&lt;`` on a line holding one of ``anywhere``
    (tag-like markers that must not appear at all)."""
    heads = tuple(m.casefold() for m in starts)
    tags = tuple(m.casefold() for m in anywhere)
    out = []
    for line in _LINE_BREAK.split(text):
        key = visible_key(line)
        shown = safe(line)
        if tags and any(tag in key for tag in tags):
            shown = "".join("&lt;" if c in _LESS_THAN else c for c in shown)
        if key.startswith(heads):
            shown = mark + shown
        out.append(shown)
    return "\n".join(out)


def one_line(text: str) -> str:
    """``text`` kept on one line: every run of spaces and line breaks one space, invisible
    characters escaped."""
    return safe(" ".join(text.split()))
