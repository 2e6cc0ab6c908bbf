"""One process per session (RES-2): a lock file beside an SQLite ledger, an advisory lock and a
lease row in a PostgreSQL one (``_pg_lock``); :meth:`session_lock` of each backend hands out the
right one.

The lock is ``<ledger>.locks/<session>.lock`` (the folder 0700, its files 0600, as the ledger
is: a holder's record names its host and process). Its holder writes ``{pid, host, started,
proc_start, session}`` into it. On POSIX the file is also ``flock``-ed: the kernel drops that lock
the instant its process dies, however it dies (SIGKILL included), so a process that gets the
``flock`` knows every earlier holder on this host is gone. The file itself is never deleted —
deleting a lock file while another process opens it is how two processes end up holding "the"
lock — it is emptied on a clean release.

Acquiring reports a *stale* holder (a non-empty file from a process that died without releasing)
so the caller can record it in the ledger: the lock is cleared, history is kept. Where ``flock``
is missing, the fallback creates the file with ``O_EXCL`` and judges an existing one by its
holder: same host and a pid that no longer runs (or runs a different process, seen by its start
time) is stale; anything else is held.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from ._errors import SessionLocked

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["SessionLock", "WriterGate", "lock_holder", "lock_path", "process_start"]


def lock_path(ledger_path: str | Path, session: str) -> Path:
    return Path(f"{ledger_path}.locks") / f"{session}.lock"


# (lock file, thread) pairs holding a gate now: one process may open a ledger twice.
_GATES_HELD: set[tuple[tuple[int, int], int]] = set()


class WriterGate:
    """Writers of one SQLite file take turns at an ``flock`` before ``BEGIN IMMEDIATE``.

    SQLite's own wait for its write lock is a busy handler that sleeps in growing steps (up to
    100 ms) and retries, so with several writer processes the lock sits free while they sleep:
    eight writers got a fifth of one writer's steps/s, with a p99 of 300 ms. Writers blocked in
    ``flock`` are woken the moment the holder lets go, and the kernel drops the lock of a
    process that dies. ``BEGIN IMMEDIATE`` still takes SQLite's lock after, for any writer
    that does not take the gate.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._usable = fcntl is not None
        self._ident: tuple[int, int] = (0, 0)  # the lock file's (device, inode)

    @classmethod
    def beside(cls, ledger_path: str | Path) -> WriterGate:
        return cls(Path(f"{ledger_path}.locks") / ".writers")

    def _open(self) -> int | None:
        """The lock file, made at the first write (a ledger opened to read makes nothing); where
        it cannot be made (a read-only place, no ``flock``) writers rely on SQLite alone."""
        if self._fd is None and self._usable:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                st = os.fstat(self._fd)
                self._ident = (st.st_dev, st.st_ino)
            except OSError:
                self._usable = False
        return self._fd

    def enter(self) -> bool:
        """Wait for this process's turn to write; False when the gate is not taken (no lock
        file, or this thread already writes the file through another ledger object: waiting
        for itself would never end, so SQLite's own wait decides and times out as before)."""
        fd = self._open()
        me = (self._ident, threading.get_ident())
        if fd is None or me in _GATES_HELD:
            return False
        fcntl.flock(fd, fcntl.LOCK_EX)  # queued: woken the moment the holder lets go
        _GATES_HELD.add(me)
        return True

    def leave(self) -> None:
        _GATES_HELD.discard((self._ident, threading.get_ident()))
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot, Linux), to tell a reused pid
    from the original process; ``None`` where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def lock_holder(path: Path) -> dict[str, Any] | None:
    """What the holder of the session lock at ``path`` wrote, if a live process holds it, read
    without taking the lock: taking it, even shared and for an instant, would refuse the
    holder's own next acquire. A hint: a holder may take or let go of it just after."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        holder = _read(fd)
    finally:
        os.close(fd)
    return holder if holder and _alive(holder) else None


def _alive(holder: dict[str, Any]) -> bool:
    if holder.get("host") != socket.gethostname():
        return True  # another host's process cannot be checked from here: assume it runs
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists and belongs to someone else
    start = holder.get("proc_start")
    return start is None or process_start(pid) in (None, start)


class _Scoped(ABC):
    """``with lock:`` takes it unless held already (:func:`lock_session` hands out a lock it
    holds) and releases it on the way out, for both kinds of session lock."""

    @property
    @abstractmethod
    def held(self) -> bool:
        """Whether this process holds the lock now."""

    @abstractmethod
    def acquire(self) -> dict[str, Any] | None:
        """Take the lock; what the previous holder left, if anything."""

    @abstractmethod
    def release(self) -> None:
        """Give the lock up (nothing when not held)."""

    def __enter__(self) -> Self:
        if not self.held:
            self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


@dataclass
class SessionLock(_Scoped):
    """``with SessionLock(path, session) as lock: ...``; ``lock.stale`` is the dead holder's
    record when one was cleared."""

    path: Path
    session: str
    stale: dict[str, Any] | None = None
    _fd: int | None = None

    def acquire(self) -> dict[str, Any] | None:
        """Take the lock or raise :class:`SessionLocked`; returns the stale holder cleared."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if fcntl is not None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read(fd)
                os.close(fd)
                raise self._locked(holder) from None
            previous = _read(fd)
        else:  # pragma: no cover - not POSIX
            fd, previous = self._exclusive()
        self._fd = fd
        self.stale = previous or None
        _write(fd, self._me())
        return self.stale

    def _exclusive(self) -> tuple[int, dict[str, Any]]:  # pragma: no cover - not POSIX
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600), {}
        except FileExistsError:
            fd = os.open(self.path, os.O_RDWR)
            holder = _read(fd)
            if holder and _alive(holder):
                os.close(fd)
                raise self._locked(holder) from None
            return fd, holder

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # an empty file: released cleanly, nothing stale to report
        if fcntl is None:  # pragma: no cover - not POSIX
            with contextlib.suppress(OSError):
                self.path.unlink()
        os.close(fd)  # closing drops the flock

    def _me(self) -> dict[str, Any]:
        pid = os.getpid()
        return {
            "pid": pid,
            "host": socket.gethostname(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "proc_start": process_start(pid),
            "session": self.session,
        }

    def _locked(self, holder: dict[str, Any]) -> SessionLocked:
        who = (
            f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('started')}"
            if holder
            else "another process"
        )
        return SessionLocked(
            f"session {self.session} is in use by {who} (lock {self.path}); wait for it to "
            "finish or stop that process, then resume",
            holder=holder,
        )

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    if not data.strip():
        return {}
    try:
        value = json.loads(data)
    except ValueError:
        return {"unreadable": data[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"unreadable": str(value)[:200]}


def _write(fd: int, holder: dict[str, Any]) -> None:
    data = json.dumps(holder, sort_keys=True).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)
