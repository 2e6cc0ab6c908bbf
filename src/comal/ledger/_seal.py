"""Keyed seals, and the secret they are keyed with.

A row's seal is the HMAC-SHA256, under the ledger's secret, of the canonical JSON array
``[table, column, ...]`` of its sealed columns (``_rows.SEALED``). Without the secret nobody can
make a seal that verifies, so a row rewritten behind the ledger's back, digests recomputed and
all, still fails. The secret never enters the database; the ledger keeps only its id and
``key_check``, an HMAC of a fixed text, to tell the right secret from a wrong one.

Where the secret comes from, first match wins:

- the ``secret=`` argument of :func:`~comal.ledger.open_ledger` (either backend);
- SQLite: the key file ``<state dir>/comal/ledger-keys/<ledger id>.key`` (platformdirs' user
  state directory, mode 0600), created when the ledger is created or migrated to keyed seals;
- the ``COMAL_LEDGER_SECRET`` environment variable: PostgreSQL's setting, which every process
  sharing the ledger must give (creating or migrating one without it is
  :class:`~comal.ledger.LedgerSecretMissing`), and for SQLite the way to verify a ledger copied
  to another machine without its key file. An in-memory SQLite ledger keys itself at random.

A ledger whose secret is missing does not open (:class:`~comal.ledger.LedgerSecretMissing`), and
one whose key check matches no secret found, or whose id no longer names a key, is
:class:`~comal.ledger.LedgerKeyMismatch`: reading it with its seals unchecked would show whatever
a writer of the file put there. Only an open asked not to be strict (``verify``, and
``open_ledger(..., strict=False)``) goes on, checking body digests but not seals; writing is then
:class:`~comal.ledger.LedgerSecretMissing`, and ``verify`` reports a ``secret`` fault naming
where it looked instead of passing.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_state_dir

from ..errors import LedgerError, UserError
from ..messages import canonical_json
from ._errors import LedgerKeyMismatch, LedgerSecretMissing, LedgerUnavailable

ENV = "COMAL_LEDGER_SECRET"
Secret = str | bytes
_CHECK_TEXT = b"comal ledger secret check"
_MIN_LENGTH = 16
_ID = re.compile(r"[0-9a-f]{32}")
NOT_SHOWN = "(a keyed seal, not shown)"  # a seal computed under the secret never leaves it


class Sealer:
    """Seals rows under one key; ``problem`` says why it cannot (no secret, a wrong one)."""

    def __init__(
        self,
        key: bytes | None,
        source: str,
        problem: str | None = None,
        target: str | None = None,
        *,
        mismatch: bool = False,
    ) -> None:
        self._keyed = _keyed(key) if key is not None else None
        self.source = source
        self.problem = problem if key is not None or problem else "no secret"
        self.target = target  # the ledger, as messages name it
        # A secret was found but the ledger's key check names another (or its id is damaged):
        # a sign of an edited ledger_meta, not only of a ledger moved without its key.
        self.mismatch = mismatch

    def refusal(self, doing: str) -> LedgerError:
        """The coded error for ``doing`` something that needs the seals checked."""
        if self.mismatch:
            return LedgerKeyMismatch(
                self.target,
                f"cannot {doing}: {self.problem}",
                "if this is the ledger's own secret, its ledger_meta was changed outside comal: "
                "run `comal verify` and restore the ledger from a backup; else give it the "
                f"secret it was made with ({ENV}, or its key file)",
            )
        return LedgerSecretMissing(self.target, f"cannot {doing}: {self.problem}", _TODO)

    @property
    def checks(self) -> bool:
        return self.problem is None

    def seal(self, table: str, values: Sequence[Any]) -> str:
        if self._keyed is None or self.problem is not None:
            raise LedgerSecretMissing(self.target, f"cannot write: {self.problem}", _TODO)
        return self._mac(table, values)

    def matches(self, table: str, values: Sequence[Any], stored: Any) -> bool:
        """Whether ``stored`` is the seal of ``values`` (always, when seals cannot be checked).

        SQLite stores a type with each value, and damage can change it: a column that no longer
        holds text, a number or NULL cannot match (and must not reach the JSON encoder)."""
        if self._keyed is None or self.problem is not None:
            return True
        try:
            return hmac.compare_digest(str(stored), self._mac(table, values))
        except (TypeError, ValueError):  # bytes in a column, or a non-ASCII "seal"
            return False

    def _mac(self, table: str, values: Sequence[Any]) -> str:
        assert self._keyed is not None
        inner, outer = self._keyed[0].copy(), self._keyed[1].copy()
        inner.update(canonical_json([table, *values]).encode("utf-8", "surrogatepass"))
        outer.update(inner.digest())
        return outer.hexdigest()

    def derive(self, purpose: str, text: str) -> str:
        """A value only the secret's holders can compute: HMAC-SHA256 under the secret of
        ``purpose`` and ``text``. Every process sharing the ledger derives the same one, and
        no seal can be made from it: its input never parses as a row's canonical JSON."""
        if self._keyed is None or self.problem is not None:
            raise LedgerSecretMissing(
                self.target, f"cannot derive a {purpose}: {self.problem}", _TODO
            )
        inner, outer = self._keyed[0].copy(), self._keyed[1].copy()
        inner.update(b"comal derived\x00" + purpose.encode() + b"\x00" + text.encode())
        outer.update(inner.digest())
        return outer.hexdigest()

    def status(self) -> str:
        if self.problem is not None:
            return f"not checked: {self.problem}"
        return f"keyed: HMAC-SHA256 under the ledger's secret (from {self.source})"


def _keyed(key: bytes) -> tuple[hashlib._Hash, hashlib._Hash]:
    """HMAC-SHA256 (RFC 2104) as two hash states keyed once: every append seals several rows,
    and the hmac module's Python wrapper costs more per seal than the hashing does. A test pins
    the result to ``hmac.new(key, text, "sha256")``."""
    block = key if len(key) <= 64 else hashlib.sha256(key).digest()
    block = block.ljust(64, b"\0")
    inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
    outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))
    return inner, outer


_TODO = "give the ledger its secret (see `comal verify`): COMAL_LEDGER_SECRET, or its key file"


def is_ledger_id(value: object) -> bool:
    """Whether ``value`` is a ledger id as comal makes them (it names files beside the key)."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def key_check(key: bytes) -> str:
    return hmac.digest(key, _CHECK_TEXT, "sha256").hex()


def key_path(ledger_id: str) -> Path:
    return Path(user_state_dir("comal", appauthor=False)) / "ledger-keys" / f"{ledger_id}.key"


def as_key(secret: Secret, source: str) -> bytes:
    key = secret.strip().encode() if isinstance(secret, str) else secret
    if len(key) < _MIN_LENGTH:
        raise UserError(
            f"the ledger secret from {source} is shorter than {_MIN_LENGTH} characters; use a "
            "long random value (e.g. `openssl rand -hex 32`)"
        )
    return key


def new_key(
    backend: str, target: str, ledger_id: str, given: Secret | None, *, memory: bool
) -> tuple[bytes, str]:
    """The secret a ledger being keyed now gets, and where it is kept (SQLite makes its file)."""
    if given is not None:
        return as_key(given, "the secret= argument"), "the secret= argument"
    env = os.environ.get(ENV)
    if backend == "postgres":
        if not env:
            raise no_operator_secret(target)
        return as_key(env, ENV), ENV
    if memory:
        return secrets.token_bytes(32), "memory (this ledger lives only in this process)"
    path = key_path(ledger_id)
    key = secrets.token_hex(32).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, key + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise LedgerUnavailable(
            target,
            f"cannot create the ledger's secret file {path} ({exc.strerror})",
            "make comal's state directory writable (or set XDG_STATE_HOME)",
        ) from exc
    return key, f"the file {path}"


def no_operator_secret(target: str) -> LedgerSecretMissing:
    return LedgerSecretMissing(
        target,
        f"a PostgreSQL ledger seals its rows with a secret the operator provides, and {ENV} is "
        "not set",
        f"set {ENV} to a long random value (e.g. `openssl rand -hex 32`) for every process that "
        "writes this ledger, and keep it outside the database",
    )


@dataclass
class Keying:
    """What keying a ledger needs from the code opening it, and the key it made (if any)."""

    backend: str
    target: str
    secret: Secret | None
    memory: bool
    made: tuple[bytes, str] | None = None
    # Refuse to open a ledger whose seals cannot be checked, or that is older than this machine
    # last saw it; False (verify) opens it to report what is wrong.
    strict: bool = True
    # Where the ledger is, as this machine names it (a file's real path, a server's database and
    # schema): what it last saw there is remembered beside the key (``_rollback``).
    place: str | None = None

    def check(self) -> None:
        """Refuse before any migration runs when keying would fail: a PostgreSQL ledger is not
        left half made for want of its secret."""
        if self.secret is not None:
            as_key(self.secret, "the secret= argument")
        elif self.backend == "postgres":
            env = os.environ.get(ENV)
            if not env:
                raise no_operator_secret(self.target)
            as_key(env, ENV)


def find_sealer(keying: Keying, meta: dict[str, Any]) -> Sealer:
    """The sealer of an existing ledger (``meta`` is its ``ledger_meta``), from the first source
    whose secret passes the ledger's ``key_check``; else one that cannot seal, saying where it
    looked."""
    looked: list[tuple[str, bytes | None]] = []
    if keying.secret is not None:
        looked.append(("the secret= argument", as_key(keying.secret, "the secret= argument")))
    if keying.backend == "sqlite":
        ledger_id = meta.get("id")
        if not (isinstance(ledger_id, str) and _ID.fullmatch(ledger_id)):
            problem = "the ledger's id is damaged, so its key file cannot be named"
            return Sealer(None, "", problem, keying.target, mismatch=True)
        path = key_path(ledger_id)
        looked.append((f"the file {path}", _read(path)))
    env = os.environ.get(ENV)
    looked.append((ENV, env.strip().encode() if env else None))
    check = meta.get("key_check")
    for source, key in looked:
        if key is not None and isinstance(check, str):
            if hmac.compare_digest(key_check(key), check):
                return Sealer(key, source, None, keying.target)
    found = [s for s, k in looked if k is not None]
    if found:
        problem = (
            f"the secret from {' and '.join(found)} is not the one this ledger was sealed with"
            " (its key check does not match)"
        )
        return Sealer(None, "", f"{problem}, so its seals cannot be checked", keying.target,
                      mismatch=True)  # fmt: skip
    where = " or ".join(s for s, _ in looked)
    problem = (
        f"this ledger's secret was not found ({where}); a ledger copied from another machine "
        f"needs its key file copied too, or {ENV} set to the key file's content"
    )
    return Sealer(None, "", f"{problem}, so its seals cannot be checked", keying.target)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes().strip() or None
    except OSError:
        return None
