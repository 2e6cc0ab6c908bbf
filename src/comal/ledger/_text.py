"""Text a ledger column can hold on both backends.

PostgreSQL TEXT holds neither NUL nor lone surrogates, and SQLite's driver cannot encode a lone
surrogate at all; bodies escape both in their JSON, so only the plain text columns (ids, titles,
kinds, models) are checked, the same way on both backends.
"""

from __future__ import annotations

import re

from ..errors import UserError

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(value: str) -> bool:
    """Whether ``value`` can be stored in (and so compared with) a text column."""
    return _UNSTORABLE.search(value) is None


def check_text(**fields: str | None) -> None:
    for name, value in fields.items():
        if value is not None and not storable(value):
            raise UserError(
                f"{name} {value!r} contains NUL or a lone surrogate, which a ledger text column "
                "cannot store; remove those characters"
            )


_INT64 = range(-(2**63), 2**63)


def check_int(**fields: int | None) -> None:
    """Numbers bound into a query must fit a 64-bit column (a hostile id must not crash the
    driver); None passes."""
    for name, value in fields.items():
        if value is not None and (not isinstance(value, int) or value not in _INT64):
            raise UserError(f"{name} must be a whole number that fits 64 bits, not {value!r}")
