"""Finding transcripts and importing them into the scratch ledger the comparison reads."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..errors import ComalError, UserError
from ..importers import detect_format, load, store
from ..ledger import Scope, SQLiteLedger, open_ledger
from ..tokens import TokenCounter
from ._strategies import Session

__all__ = ["find_transcripts", "load_sessions", "scratch_ledger"]

_SUFFIXES = {".json", ".jsonl", ".traj"}
# LoCoMo files are long chat conversations for memory QA: no tool calls, no agent run to replay.
_SKIPPED_FORMATS = {"locomo"}


def find_transcripts(paths: Iterable[Path]) -> list[Path]:
    """Files given, and transcript files (.json, .jsonl, .traj) under folders given."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
        elif path.is_file():
            found.append(path)
        else:
            raise UserError(f"{path} is neither a transcript file nor a folder; check the path")
    return found


def load_sessions(
    ledger: SQLiteLedger, files: Sequence[Path], *, min_calls: int = 2
) -> tuple[list[Session], list[str]]:
    """Import each file into ``ledger``; sessions with at least ``min_calls`` model calls, and a
    note for every file or session left out."""
    sessions: list[Session] = []
    notes: list[str] = []
    for path in files:
        label = f"{path.parent.name}/{path.name}"
        try:
            fmt = detect_format(path)
            if fmt in _SKIPPED_FORMATS:
                notes.append(f"{label}: skipped, a {fmt} conversation has no agent run to replay")
                continue
            imported = load(path, fmt)
            stored = store(ledger, imported)
        except ComalError as exc:
            notes.append(f"{label}: not imported ({exc.code})")
            continue
        # store() writes parents before children, keeping the order among each.
        ordered = sorted(imported, key=lambda s: s.parent_key is not None)
        for k, (imp, st) in enumerate(zip(ordered, stored, strict=True)):
            scope = ledger.resolve(st.session)
            entries = tuple(ledger.iter_entries(scope))
            name = label if len(stored) == 1 else f"{label} #{k + 1}"
            originals = tuple(imp.messages)
            if len(originals) != len(entries):
                raise RuntimeError(f"{name}: {len(originals)} messages but {len(entries)} entries")
            timed, ttl = bool(imp.times), _ttl(ledger, scope)
            session = Session(name, scope, entries, originals, ledger, timed, ttl)
            if len(session.turns) < min_calls:
                notes.append(f"{name}: skipped, {len(session.turns)} model call(s)")
                continue
            sessions.append(session)
    return sessions, notes


def _ttl(ledger: SQLiteLedger, scope: Scope) -> str:
    """The cache lifetime the session's requests asked for: "1h" when any recorded usage
    shows 1-hour cache writes (Anthropic's ``cache_creation.ephemeral_1h_input_tokens``)."""
    for record in ledger.requests(scope):
        raw = record.meta.get("raw")
        made = raw.get("cache_creation") if isinstance(raw, dict) else None
        hour = made.get("ephemeral_1h_input_tokens") if isinstance(made, dict) else None
        if isinstance(hour, int) and hour > 0:
            return "1h"
    return "5m"


@contextmanager
def scratch_ledger(counter: TokenCounter) -> Iterator[SQLiteLedger]:
    with tempfile.TemporaryDirectory(prefix="comal-bench-") as tmp:
        led = open_ledger(Path(tmp) / "bench.db", counter=counter)
        try:
            yield led
        finally:
            led.close()
