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
