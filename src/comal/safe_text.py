"""Text from the ledger or a model made safe to print on a terminal (issue: hostile output).

The ledger keeps every byte a tool or model produced; a face that prints it must not let those
bytes act on the terminal. ESC sequences can clear the screen or rewrite what was shown, OSC 52
writes the clipboard, a carriage return overwrites the line, and bidirectional overrides
(U+202E) reorder what a reader sees, so an approval prompt could show one command and run
another. :func:`safe` renders each such character visibly (``\\x1b``, ``\\u202e``) and keeps
newlines and tabs, so the text reads as before and nothing in it is executed by the terminal.
"""

from __future__ import annotations

import re

__all__ = ["is_safe", "safe", "safe_command"]

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


def is_safe(text: str) -> bool:
    return _UNSAFE.search(text) is None


def safe_command(command: str) -> str:
    """A command for an approval prompt: exactly what will run, unambiguous. When it holds
    characters a terminal would act on or hide, they are escaped and the line says so."""
    shown = safe(command)
    if shown == command:
        return command
    return f"{shown}\n(this command contains control or invisible characters, shown escaped)"
