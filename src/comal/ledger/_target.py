"""Where a ledger lives: a file path or a ``postgresql://`` URL, and how to name it safely.

A target is text. Text that starts with ``postgresql:`` or ``postgres:`` (any case) is a URL and
must be one (``scheme://...``); anything else is a file path. A URL given as a filesystem path
(``Path("postgresql://u@h/db")``) has lost its ``//`` and is refused rather than turned into a
file named ``postgresql:``. :func:`describe_target` is the only way a target reaches a message or a
log: it drops the password wherever a URL may carry one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from platformdirs import user_data_dir

from ._errors import LedgerBadTarget

__all__ = ["Target", "default_ledger_target", "describe_target", "parse_target"]

_PG_SCHEMES = ("postgresql", "postgres")

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


def _looks_like_url(text: str) -> bool:
    scheme, colon, _ = text.partition(":")
    return bool(colon) and scheme.lower() in _PG_SCHEMES


def parse_target(target: LedgerTarget) -> Target:
    """Classify ``target`` (None: :func:`default_ledger_target`); refuse malformed URLs."""
    if target is None:
        target = default_ledger_target()
    given_as_path = not isinstance(target, str)
    text = os.fspath(target)
    if not isinstance(text, str):
        raise LedgerBadTarget(None, f"ledger target {text!r} is not text", "pass a path or a URL")
    if not _looks_like_url(text):
        if not text:
            raise LedgerBadTarget(
                None, "the ledger target is empty", "pass a file path or a postgresql:// URL"
            )
        return Target("sqlite", text)
    shown = describe_target(text)
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
    if not isinstance(text, str) or not _looks_like_url(text):
        return str(text)
    scheme, _, rest = text.partition(":")
    if not rest.startswith("//"):  # a collapsed URL still carries its user and password
        text = f"{scheme}://{rest.lstrip('/')}"
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
