"""Proxy API keys: one tenant each, stored as a sha256 of the whole key, never the key itself.

A key reads ``comal_<id>_<secret>``: ``id`` (12 hex digits) is public and names the row, so a
check reads one row and compares digests in constant time; the secret (32 random bytes,
URL-safe base64) is shown once, when the key is made. Revoking sets ``revoked_at``; nothing is
deleted.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import UserError
from ..messages import sha256_hex
from ._store import StoreBase, now

__all__ = ["KEYS_DDL", "KEY_PREFIX", "ProxyKey", "ProxyKeys"]

KEY_PREFIX = "comal_"
_SHAPE = re.compile(r"comal_([0-9a-f]{12})_([A-Za-z0-9_-]{20,})")

KEYS_DDL = """
CREATE TABLE proxy_keys (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX proxy_keys_tenant ON proxy_keys (tenant);
"""


@dataclass(frozen=True, slots=True)
class ProxyKey:
    """A stored key's public facts (the secret is never stored)."""

    id: str
    tenant: str
    name: str
    created_at: str
    revoked_at: str | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "active": self.active}


def _digest(key: str) -> str:
    return "sha256:" + sha256_hex(key)


class ProxyKeys(StoreBase):
    """The ``comal keys`` table."""

    def _key_rows(self, where: str, args: tuple[Any, ...]) -> Iterator[ProxyKey]:
        with self._reading() as c:
            rows = c.execute(
                "SELECT id, tenant, name, created_at, revoked_at FROM proxy_keys"
                f" WHERE {where} ORDER BY created_at, id",
                args,
            ).fetchall()
        for r in rows:
            yield ProxyKey(r[0], r[1], r[2], r[3], r[4])

    def add_proxy_key(self, tenant: str, name: str = "") -> tuple[ProxyKey, str]:
        """A new key for ``tenant``: its record and the key itself (shown once, never stored)."""
        if not tenant:
            raise UserError("a proxy key needs a tenant; pass --tenant NAME")
        key_id = secrets.token_hex(6)
        key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        created = now()
        with self.atomic() as c:
            c.execute(
                "INSERT INTO proxy_keys (id, tenant, name, hash, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (key_id, tenant, name, _digest(key), created),
            )
        return ProxyKey(key_id, tenant, name, created, None), key

    def proxy_keys(self, *, tenant: str | None = None) -> list[ProxyKey]:
        """Every key (revoked ones too), optionally of one tenant."""
        if tenant is None:
            return list(self._key_rows("1 = 1", ()))
        return list(self._key_rows("tenant = ?", (tenant,)))

    def has_active_proxy_keys(self) -> bool:
        return any(self._key_rows("revoked_at IS NULL", ()))

    def check_proxy_key(self, key: str) -> ProxyKey | None:
        """The active key ``key`` is, or ``None`` (malformed, unknown, wrong or revoked)."""
        match = _SHAPE.fullmatch(key)
        if match is None:
            return None
        with self._reading() as c:
            row = c.execute(
                "SELECT id, tenant, name, created_at, revoked_at, hash FROM proxy_keys"
                " WHERE id = ?",
                (match[1],),
            ).fetchone()
        if row is None or row[4] is not None:
            return None
        if not hmac.compare_digest(str(row[5]), _digest(key)):
            return None
        return ProxyKey(row[0], row[1], row[2], row[3], row[4])

    def revoke_proxy_key(self, key_id: str) -> ProxyKey:
        """Revoke by id (``comal keys list`` shows ids); revoking twice keeps the first time."""
        with self.atomic() as c:
            c.execute(
                "UPDATE proxy_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now(), key_id),
            )
        found = list(self._key_rows("id = ?", (key_id,)))
        if not found:
            raise UserError(f"no proxy key {key_id!r}; list them with `comal keys list`")
        return found[0]
