"""Where a ledger lives: a file path or a URL, and how to name it safely.

A target is text, classified here and nowhere else (``open_ledger``, both backends' constructors,
``--ledger``, ``COMAL_LEDGER`` and ``comal serve --ledger`` all reach :func:`parse_target`):

- ``postgresql://`` and ``postgres://`` (any case) name a PostgreSQL ledger. A URL given as a
  filesystem path (``Path("postgresql://u@h/db")``) has lost its ``//`` and is refused rather than
  turned into a file named ``postgresql:``;
- ``sqlite:`` (or ``sqlite3:``) and ``file:`` URLs name an SQLite ledger file when they can mean
  one file only: ``sqlite:////abs/l.db`` and ``file:///abs/l.db`` (or ``file://localhost/...``,
  ``file:/abs/l.db``) are ``/abs/l.db``, percent-escapes decoded. ``sqlite:///tmp/a.db`` is read
  two ways (SQLAlchemy: the relative ``tmp/a.db``; most readers: ``/tmp/a.db``), so it is refused
  with both spellings that would be clear, rather than guessed: a guess would put the ledger
  where its user is not looking. A query (``?mode=ro``) is refused too, not silently dropped;
- any other ``scheme://`` (``mysql://``, ``https://``) is a store comal does not have: refused,
  where a path would have made a folder named ``mysql:`` and an empty ledger inside it;
- anything else is a file path (``a:b.db`` and ``C:/x`` included: no ``//``, or a one-letter
  scheme, which is a drive).

Every refusal is :class:`LedgerBadTarget` (``LEDGER_BAD_TARGET``), raised before anything is
created, naming the target and the forms accepted. :func:`describe_target` is the only way a
target reaches a message or a log: it drops the password wherever a URL may carry one, whatever
its scheme.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from platformdirs import user_data_dir

from ._errors import LedgerBadTarget

__all__ = ["Target", "default_ledger_target", "describe_target", "parse_target"]

_PG_SCHEMES = ("postgresql", "postgres")
_PATH_SCHEMES = ("sqlite", "sqlite3", "file")
# RFC 3986's scheme, two characters at least: a one-letter "scheme" is a Windows drive.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")

LedgerTarget = str | os.PathLike[str] | None


@dataclass(frozen=True, slots=True)
class Target:
    kind: Literal["sqlite", "postgres"]
    value: str  # the path text, or the URL exactly as given (password included)
    password: str | None = None  # as written in the URL; hidden from every message

    @property
    def described(self) -> str:
        return describe_target(self.value)


def default_ledger_target() -> str:
    """``COMAL_LEDGER`` as given (a path or a URL), else ``ledger.db`` in the user data dir."""
    env = os.environ.get("COMAL_LEDGER")
    if env:
        return env
    return str(Path(user_data_dir("comal", appauthor=False)) / "ledger.db")


def _url_scheme(text: str) -> str | None:
    """The scheme (lower case) of text that is meant as a URL, or None for a path."""
    match = _SCHEME.match(text)
    if match is None:
        return None
    scheme = match.group(1).lower()
    if scheme in _PG_SCHEMES or scheme in _PATH_SCHEMES or text[match.end() :].startswith("//"):
        return scheme
    return None


ACCEPTED = (
    "pass a file path, sqlite:////absolute/path.db, file:///absolute/path.db or "
    "postgresql://user@host:port/database"
)


def _file_url_path(scheme: str, text: str, shown: str) -> str:
    """The file a ``sqlite:`` or ``file:`` URL names without doubt, or LedgerBadTarget."""
    rest = text.split(":", 1)[1]
    if "?" in rest or "#" in rest:
        raise LedgerBadTarget(
            shown, "a ledger URL takes no query or fragment (it would be ignored)", ACCEPTED
        )
    if rest.startswith("//"):
        host, slash, rest = rest[2:].partition("/")
        if host.lower() not in ("", "localhost"):
            raise LedgerBadTarget(
                shown, f"a {scheme}: URL cannot name a file on another host ({host})", ACCEPTED
            )
        rest = slash + rest
    elif scheme != "file" or not rest.startswith("/"):
        # sqlite:a.db and file:a.db follow no convention anyone reads the same way.
        raise LedgerBadTarget(shown, f"not a {scheme}: URL comal reads", ACCEPTED)
    path = unquote(rest)
    if scheme == "file" or path.startswith("//"):
        path = "/" + path.lstrip("/")
        if path != "/":
            return path
    elif path == "/:memory:":
        return ":memory:"
    if path.strip("/") == "":
        raise LedgerBadTarget(shown, "the URL names no file", ACCEPTED)
    relative = path[1:]
    raise LedgerBadTarget(
        shown,
        f"it reads as {relative} (relative, as SQLAlchemy reads it) or as /{relative}"
        " (as a file URL does)",
        f"pass the path itself ({relative} or /{relative}), or write {scheme}:////{relative} "
        f"for /{relative}",
    )


def parse_target(target: LedgerTarget) -> Target:
    """Classify ``target`` (None: :func:`default_ledger_target`); refuse malformed URLs."""
    if target is None:
        target = default_ledger_target()
    given_as_path = not isinstance(target, str)
    text = os.fspath(target)
    if not isinstance(text, str):
        raise LedgerBadTarget(None, f"ledger target {text!r} is not text", "pass a path or a URL")
    scheme = _url_scheme(text)
    if scheme is None:
        if not text:
            raise LedgerBadTarget(
                None, "the ledger target is empty", "pass a file path or a postgresql:// URL"
            )
        return Target("sqlite", text)
    shown = describe_target(text)
    if scheme in _PATH_SCHEMES:
        return Target("sqlite", _file_url_path(scheme, text, shown))
    if scheme not in _PG_SCHEMES:
        raise LedgerBadTarget(shown, f"comal has no {scheme}:// ledger", ACCEPTED)
    if given_as_path or not text.split(":", 1)[1].startswith("//"):
        raise LedgerBadTarget(
            shown,
            "this looks like a PostgreSQL URL whose // was lost (was it passed as a filesystem "
            "path?)",
            "pass the URL as text, written postgresql://user@host:port/database",
        )
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError as exc:
        raise LedgerBadTarget(
            shown, f"the URL does not parse ({exc})", "write postgresql://user@host:port/database"
        ) from exc
    for host in parts.netloc.rsplit("@", 1)[-1].split(","):
        port = host.rsplit("]", 1)[-1].rpartition(":")[2] if ":" in host.rsplit("]", 1)[-1] else ""
        if port and not port.isdigit():
            raise LedgerBadTarget(
                shown, f"port {port!r} is not a number", "write postgresql://host:5432/database"
            )
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "password":
            password = value
    return Target("postgres", text, password or None)


def describe_target(target: LedgerTarget) -> str:
    """The target as messages and logs may show it: a URL without its password.

    ``postgresql://me:secret@db:5432/app?password=x&sslmode=require`` reads as
    ``postgresql://me@db:5432/app?sslmode=require``; a path reads as itself.
    """
    if target is None:
        target = default_ledger_target()
    text = os.fspath(target)
    if not isinstance(text, str) or _url_scheme(text) is None:
        return str(text)
    scheme, _, rest = text.partition(":")
    if not rest.startswith("//"):
        if scheme.lower() not in _PG_SCHEMES:
            return text  # no authority, so no password: sqlite:a.db
        text = f"{scheme}://{rest.lstrip('/')}"  # a collapsed URL still carries its password
    try:
        parts = urlsplit(text)
    except ValueError:
        return text.split(":", 1)[0] + "://(unparseable URL)"
    userinfo, at, hosts = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    netloc = f"{user}@{hosts}" if at and user else hosts
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if "password" not in k]
    )
    shown = f"{parts.scheme}://{netloc}{parts.path}"
    return f"{shown}?{query}" if query else shown


def redact(text: str, password: str | None) -> str:
    """``text`` (a driver's message) with every spelling of ``password`` blotted out."""
    if not password:
        return text
    for spelling in {password, unquote(password)}:
        if spelling:
            text = text.replace(spelling, "***")
    return text
