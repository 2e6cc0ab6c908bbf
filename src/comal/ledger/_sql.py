"""One SQL, two dialects: statements shared by SQLite and PostgreSQL are written once, with
``?`` placeholders, and each backend's :class:`Dialect` names what differs.

Differences named here: the placeholder (``?`` / ``%s``) and row locks (PostgreSQL's
``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already holds the only write lock). Both speak
``RETURNING``, ``ON CONFLICT ... DO NOTHING`` and row-value comparisons. What differs beyond that
(full-text search, the tail cursor, integrity checks) lives in the backend's own module.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    placeholder: str
    for_update: str

    def q(self, sql: str) -> str:
        """``sql`` written with ``?`` in this dialect (shared SQL never holds a literal ``?``
        or ``%``)."""
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def marks(self, n: int) -> str:
        return ", ".join([self.placeholder] * n)


SQLITE = Dialect("sqlite", "?", "")
POSTGRES = Dialect("postgres", "%s", " FOR UPDATE")

# The migration both backends add to harden the ledger (its Python part is in _hardening.py).
HARDENING = "0003_ledger_hardening"
