"""Append imported sessions to the ledger: one file, one transaction."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..ledger import LedgerBackend, Scope, StepInput, UsageInput
from ..messages import first_words, group_messages
from ..tokens import normalize_usage
from ._base import ImportedSession

# Session ids derive from the file's bytes and the session key, so importing a file twice finds
# the sessions already there instead of duplicating them.
_NAMESPACE = uuid.UUID("6f1c1f64-5a38-4c8e-9a57-1c2f0c6b9d10")


@dataclass(frozen=True, slots=True)
class StoredSession:
    path: str
    session: str
    format: str
    entries: int
    tool_calls: int
    tool_results: int
    usages: int
    created: bool  # False: it was already in the ledger
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "session": self.session,
            "format": self.format,
            "entries": self.entries,
            "tool_calls": self.tool_calls,
            "tool_results": self.tool_results,
            "usages": self.usages,
            "created": self.created,
            "warnings": list(self.warnings),
        }


def file_digest(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def session_id_for(digest: str, imported: ImportedSession) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{digest}:{imported.format}:{imported.key}"))


def store(
    ledger: LedgerBackend,
    sessions: Sequence[ImportedSession],
    *,
    tenant: str = "local",
    agent: str | None = None,
    digest: str | None = None,
) -> list[StoredSession]:
    """Write every session parsed from one file atomically; parents before children.

    An imported session is history: it is stored ``finished`` (resuming it reopens it), and
    starts when its transcript did (``meta["started_at"]``, an ISO time, when the importer
    found one; else the import's own time).
    """
    if not sessions:
        return []
    digest = digest or file_digest(sessions[0].source)
    ids = {s.key: session_id_for(digest, s) for s in sessions}
    ordered = sorted(sessions, key=lambda s: s.parent_key is not None)
    results: list[StoredSession] = []
    with ledger.atomic():
        for imp in ordered:
            sid = ids[imp.key]
            calls = sum(len(m.tool_calls) for m in imp.messages)
            res = sum(1 for m in imp.messages if m.tool_result is not None)
            if ledger.session(Scope(tenant, agent or imp.format, sid)) is not None:
                results.append(
                    StoredSession(
                        imp.source,
                        sid,
                        imp.format,
                        len(imp.messages),
                        calls,
                        res,
                        len(imp.usages),
                        False,
                        imp.warnings,
                    )
                )
                continue
            meta = dict(imp.meta) | {
                "format": imp.format,
                "key": imp.key,
                "file_sha256": digest,
                "warnings": list(imp.warnings),
            }
            scope = ledger.create_session(
                tenant,
                agent or imp.format,
                session_id=sid,
                parent=ids.get(imp.parent_key) if imp.parent_key else None,
                title=title_of(imp),
                source=str(imp.source),
                meta=meta,
                created_at=_started(imp),
                status="finished",
            )
            written = ledger.append_steps(scope, _steps(imp))
            results.append(
                StoredSession(
                    imp.source,
                    sid,
                    imp.format,
                    written,
                    calls,
                    res,
                    len(imp.usages),
                    True,
                    imp.warnings,
                )
            )
    return results


def title_of(imp: ImportedSession, width: int = 80) -> str | None:
    """The transcript's own title; else its task (``instance_id``); else the first line the
    user wrote. A listing shows titles, and a file path names a file, not what was done in it."""
    if imp.title:
        return imp.title
    task = imp.meta.get("instance_id")
    if isinstance(task, str) and task.strip():
        return task.strip()[:width]
    return first_words(imp.messages, width)


def _started(imp: ImportedSession) -> str | None:
    started = imp.meta.get("started_at")
    if not isinstance(started, str):
        return None
    try:
        datetime.fromisoformat(started)
    except ValueError:
        return None  # an unreadable time is not worth failing the import over
    return started


def _steps(imp: ImportedSession) -> list[StepInput]:
    by_index: dict[int, list[UsageInput]] = {}
    for rec in imp.usages:
        by_index.setdefault(rec.message_index, []).append(
            UsageInput(
                normalize_usage(rec.protocol, rec.raw),
                model=rec.model,
                protocol=rec.protocol,
                meta={"raw": dict(rec.raw)},
            )
        )
    times = _times(imp)
    steps: list[StepInput] = []
    for group in group_messages(imp.messages):
        usages: list[UsageInput] = []
        for i in range(group.start, group.start + len(group.messages)):
            usages.extend(by_index.get(i, ()))
        # The step's time is its last message's: when its results were in, which is when the
        # agent sent its next request.
        when = times[group.start + len(group.messages) - 1] if times else None
        steps.append(StepInput(group.messages, tuple(usages), when))
    return steps


def _times(imp: ImportedSession) -> list[str | None]:
    """Each message's time in the transcript as fixed-width UTC text, or none at all.

    A message the transcript gave no time of its own (a result the import wrote, a record
    without one) takes the time of the message before it, the leading ones the first time
    there is: a step's time never falls between two import clocks, so the gaps between an
    imported session's steps are the transcript's own (what ``comal bench compare`` prices a
    cache expiry by). A transcript with no time at all keeps the import's own."""
    parsed = [_utc(t) for t in imp.times]
    if len(parsed) != len(imp.messages) or not any(parsed):
        return []
    first = next(t for t in parsed if t is not None)
    out: list[str | None] = []
    last = first
    for t in parsed:
        last = t if t is not None else last
        out.append(last)
    return out


def _utc(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.isoformat(timespec="microseconds")
