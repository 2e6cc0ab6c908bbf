"""Importers: agent transcripts on disk into comal's canonical messages.

:func:`load` is a pure function of a file: it writes nothing. :func:`store` appends what it
returned to a ledger, one file in one transaction. :func:`load` returns one
:class:`ImportedSession` per conversation in the file (an OpenHands evaluation file holds one
per instance, resolver output one per issue; a Claude Code session adds one child session per
sub-agent sidechain).

Every tool output is kept byte for byte as a :class:`~comal.messages.ToolResult`; each tool
call is paired with its result by the format's ids, or by position where the format has none.

Damaged files: by default (strict) the first fault raises
:class:`~comal.errors.ImportFormatError` naming the file, line and field, and nothing is
returned. ``lenient=True`` skips each bad record with a warning naming it, closes calls whose
result never came with an explicit error result, and counts both in ``meta``
(``skipped_records``, ``closed_calls``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from comal.errors import ImportFormatError, UserError

from . import (
    _claude_code,
    _codex,
    _locomo,
    _mini_swe_agent,
    _openhands,
    _openhands_resolver,
    _plain,
    _swe_agent,
)
from ._base import INTERRUPTED, Faults, ImportedSession, UsageRecord
from ._detect import _NAMES, detect
from ._store import StoredSession, file_digest, store

__all__ = [
    "FORMATS",
    "INTERRUPTED",
    "ImportedSession",
    "StoredSession",
    "UsageRecord",
    "detect_format",
    "file_digest",
    "load",
    "store",
]

FORMATS: tuple[str, ...] = _NAMES

_LOADERS: dict[str, Callable[[Path, Faults], list[ImportedSession]]] = {
    "claude-code": _claude_code.load,
    "claude-code-web": _claude_code.load_web,
    "swe-agent": _swe_agent.load,
    "mini-swe-agent": _mini_swe_agent.load,
    "codex": _codex.load,
    "openhands": _openhands.load,
    "openhands-resolver": _openhands_resolver.load,
    "openai": _plain.load_openai,
    "anthropic": _plain.load_anthropic,
    "locomo": _locomo.load,
}


def detect_format(path: str | Path) -> str:
    """The format of ``path``, judged by its content; raises ImportFormatError if none fits."""
    return detect(Path(path))


def load(path: str | Path, format: str = "auto", *, lenient: bool = False) -> list[ImportedSession]:
    """Import every session in ``path``. See the module docstring for strict and lenient."""
    p = Path(path)
    fmt = detect(p) if format == "auto" else format
    loader = _LOADERS.get(fmt)
    if loader is None:
        raise UserError(f"unknown import format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    faults = Faults(str(p), lenient)
    try:
        sessions = faults.hand_over(loader(p, faults))
    except ImportFormatError as exc:
        if format == "auto":
            raise
        # A forced format that does not fit: say what the content looks like instead.
        try:
            seen = detect(p)
        except ImportFormatError:
            raise exc from None
        if seen == fmt:
            raise
        raise ImportFormatError(
            f"{exc.reason} (the content looks like {seen!r}, not {fmt!r})",
            path=exc.path,
            line=exc.line,
            field=exc.field,
        ) from exc
    if format != "auto" and not any(s.messages for s in sessions):
        # A forced format that read nothing from a non-empty file: the file is another format
        # (a Codex rollout read as Claude Code yields no records), not an empty session.
        found: str | None
        try:
            found = detect(p)
        except ImportFormatError:
            found = None
        if found != fmt and p.stat().st_size > 0:
            looks = f"; the content looks like {found!r}" if found else ""
            raise ImportFormatError(
                f"nothing in this file reads as {fmt!r}{looks}. Import it with --format "
                f"{found or 'auto'}, or leave --format out to detect it",
                path=str(p),
            )
    return sessions
