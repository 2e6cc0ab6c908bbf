"""What this machine last saw of a ledger, kept beside its key, so an older copy put back in its
place is found (:class:`~comal.ledger.LedgerRolledBack`).

Seals cannot tell an old copy from the ledger: every row of a backup matches its seal. So each
strict open, and each close of a ledger that wrote, records what it saw — the ledger's sealed
head (generation, sessions, digest: ``_ledger_head``) and its newest entry and record ids —
in a 0600 file beside the key: ``<state dir>/comal/ledger-keys/<ledger id>.<place>.seen``,
``place`` a digest of where the ledger is (an SQLite file's real path; a PostgreSQL server,
database and schema). A copy of a ledger elsewhere (a backup opened to read) has its own record;
an older copy in the place of a newer one does not match it.

*Older* means: a lower generation (sessions were created or deleted since), or the same
generation with other sessions (a fork) or a lower newest entry or record id (appends since:
ids only grow between two changes of the session set; a deletion is a new generation). A newer
ledger replaces the record, under an ``flock`` so that concurrent processes keep the newest.

What it cannot see: a rollback on a machine that never opened the ledger there, or before it
recorded anything; one session's tail put back while the rest stays newer (each session's own
sealed head matches its older tail); and anyone who can write this file (the key's owner, who
can also forge seals). After a crash of the machine itself, an SQLite ledger with
``synchronous=NORMAL`` (or PostgreSQL with ``synchronous_commit = off``) may lose its last
commits and read as rolled back: accept it after checking it (``comal verify
--accept-restore``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..messages import sha256_hex
from ._ledger_head import LedgerHead
from ._seal import key_path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ._db import Db

log = logging.getLogger("comal.ledger")


@dataclass(frozen=True, slots=True)
class Seen:
    """A ledger's state as far as ordering it goes."""

    generation: int
    sessions: int
    digest: str
    entries: int  # the newest entry id (0: none)
    records: int  # the newest record id

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def observe(c: Db, head: LedgerHead) -> Seen:
    """The state of the ledger ``c`` reads, its head already read and checked."""
    newest = c.execute(
        "SELECT (SELECT max(id) FROM entries), (SELECT max(id) FROM records)"
    ).fetchone()
    return Seen(head.generation, head.sessions, head.digest, int(newest[0] or 0),
                int(newest[1] or 0))  # fmt: skip


def why_older(now: Seen, seen: Seen) -> str | None:
    """Why ``now`` is older than (or not a continuation of) ``seen``; None when it is not."""
    if now.generation < seen.generation:
        return (
            f"its sessions were last created or deleted at generation {now.generation}, and this "
            f"machine saw generation {seen.generation} there ({_sessions(seen.sessions)})"
        )
    if now.generation > seen.generation:
        return None
    if now.digest != seen.digest or now.sessions != seen.sessions:
        return (
            f"it holds other sessions than this machine saw there at the same generation "
            f"({_sessions(now.sessions)} against {seen.sessions})"
        )
    for what, have, had in (("entry", now.entries, seen.entries),
                            ("record", now.records, seen.records)):  # fmt: skip
        if have < had:
            return f"its newest {what} is {have}, and this machine saw {what} {had} there"
    return None


def _sessions(n: int) -> str:
    return f"{n} session{'' if n == 1 else 's'}"


def state_path(ledger_id: str, place: str) -> Path:
    return key_path(ledger_id).with_name(f"{ledger_id}.{sha256_hex(place)[:16]}.seen")


def load(path: Path) -> Seen | None:
    """The state recorded at ``path``; None when there is none (or it does not read)."""
    try:
        data = json.loads(path.read_text())
        return Seen(**{k: data[k] for k in Seen.__dataclass_fields__})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ledger: cannot read %s (%s); what this machine saw is forgotten", path, exc)
        return None


def remember(path: Path, now: Seen, place: str, *, replace: bool = False) -> None:
    """Record ``now`` at ``path`` unless what is there is newer (``replace``: record it
    anyway: a restore accepted). Failing to write is logged, never raised: a ledger opened
    where the state directory is read-only still opens."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        log.warning("ledger: cannot record what was seen in %s (%s)", path, exc.strerror)
        return
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # concurrent closers keep the newest, not the last
        seen = None if replace else load(path)
        if seen is not None and (seen == now or why_older(now, seen) is not None):
            return
        record = now.as_dict() | {"place": place, "at": datetime.now(UTC).isoformat()}
        tmp = Path(f"{path}.tmp")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(out, "w") as f:
            json.dump(record, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("ledger: cannot record what was seen in %s (%s)", path, exc.strerror)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
