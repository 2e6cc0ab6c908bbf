"""``comal sessions``: one page of the ledger's sessions, newest first, laid out for the terminal.

The page is one bounded query (:meth:`~comal.ledger.LedgerBackend.session_page`): a ledger of a
hundred thousand sessions lists as fast as one of ten. The table fits the terminal it is printed
to: 140 columns and more show every column and whole ids; narrower, an id prefix (which every
command takes), the agent, tokens, status and the title, each cut with an ellipsis rather than
wrapped, so one session is one line at 80 columns.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from ..errors import UserError
from ..safe_text import safe

if TYPE_CHECKING:
    from ..ledger import SessionInfo, SessionPage

__all__ = [
    "DEFAULT_LIMIT",
    "Listing",
    "ListingError",
    "hint",
    "listing",
    "parse_since",
    "table",
    "width",
]

DEFAULT_LIMIT = 20
WIDE = 140  # every column, whole ids
SHORT_ID = 8
_RELATIVE = re.compile(r"(\d{1,6})\s*([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class ListingError(UserError):
    """An option of ``comal sessions`` that names no page or time; says which and the forms."""

    code = "SESSIONS_OPTION"


@dataclass(frozen=True, slots=True)
class Listing:
    """Which page to read: ``limit`` None is every session."""

    limit: int | None
    page: int
    since: str | None

    @property
    def offset(self) -> int:
        return 0 if self.limit is None else (self.page - 1) * self.limit


def listing(limit: int | None, page: int | None, every: bool, since: str | None) -> Listing:
    """The page the options name; ``--all`` with ``--limit`` or ``--page`` is refused (one of
    them would be ignored)."""
    if every and (limit is not None or page is not None):
        given = "--limit" if limit is not None else "--page"
        raise ListingError(f"--all lists every session; {given} pages them: pass one or the other")
    when = None if since is None else parse_since(since)
    return Listing(None if every else (limit or DEFAULT_LIMIT), page or 1, when)


def parse_since(text: str, now: datetime | None = None) -> str:
    """``--since``: an ISO date or time (``2025-01-31``, ``2025-01-31T12:00Z``; no zone is
    UTC), or an age (``30m``, ``12h``, ``7d``, ``2w``), as an ISO time."""
    value = text.strip()
    relative = _RELATIVE.fullmatch(value.lower())
    if relative is not None:
        amount, unit = int(relative.group(1)), _UNITS[relative.group(2)]
        try:
            return ((now or datetime.now(UTC)) - timedelta(**{unit: amount})).isoformat()
        except OverflowError:
            raise ListingError(f"--since {text!r} reaches before the year 1") from None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ListingError(
            f"--since {text!r} is neither a date nor an age; write 2025-01-31, "
            "2025-01-31T12:00Z, or 30m / 12h / 7d / 2w"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).isoformat()


def width() -> int:
    """The width to lay the table out for: ``COLUMNS`` or the terminal's, else 160 (a pipe),
    read when the command runs (the shared console fixed its width when it was made)."""
    return shutil.get_terminal_size(fallback=(160, 24)).columns


def _title(s: SessionInfo) -> str:
    """The session's title on one line; else, for a session imported before titles were
    derived, its file's name in parentheses (a name, not a title)."""
    if s.title:
        return " ".join(s.title.split())
    if s.source:
        return f"({os.path.basename(s.source.rstrip('/')) or s.source})"
    return ""


def _tokens(n: int) -> str:
    for size, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= size:
            scaled = n / size
            return f"{scaled:.1f}{suffix}" if scaled < 100 else f"{scaled:.0f}{suffix}"
    return str(n)


def _started(s: SessionInfo) -> str:
    return s.created_at[:16].replace("T", " ")


def _cells(s: SessionInfo, depth: int, saved: float | None, wide: bool) -> list[str]:
    mark = "  " * (depth - 1) + "└ " if depth else ""
    if wide:
        money = "—" if saved is None else f"${saved:,.4f}"
        head = [mark + s.id, _started(s), f"{s.tenant}/{s.agent}", f"{s.entries:,}", money]
        return [*head, f"{s.tokens:,}", s.status, _title(s)]
    agent = s.agent if s.tenant == "local" else f"{s.tenant}/{s.agent}"
    # Narrow, the status is said only where it is not the usual "finished", before the title:
    # a column of "finished" would take the title's room on every line.
    status = "" if s.status == "finished" else f"({s.status}) "
    return [mark + s.id[:SHORT_ID], _started(s), agent, _tokens(s.tokens), status + _title(s)]


_HEADS = {
    True: ("session", "started (UTC)", "tenant/agent", "entries", "saved", "tokens", "status"),
    False: ("id", "started (UTC)", "agent", "tokens"),
}
_RIGHT = {"entries", "saved", "tokens"}
_AGENT_CAP = {True: 24, False: 12}
MIN_TITLE = 16


def table(
    rows: list[tuple[SessionInfo, int]], saved: dict[str, float | None], columns: int
) -> Table:
    """The sessions (in tree order, with depths) as a table for ``columns`` columns: every
    column but the title as wide as its widest cell, the title the rest, cut with an ellipsis."""
    wide = columns >= WIDE
    while True:
        heads = _HEADS[wide]
        cells = [_cells(s, depth, saved.get(s.id), wide) for s, depth in rows]
        widths = [max([cell_len(h), *(cell_len(c[i]) for c in cells)]) for i, h in enumerate(heads)]
        longest = max([cell_len("title"), *(cell_len(c[-1]) for c in cells)])
        agent = heads.index("tenant/agent" if wide else "agent")
        widths[agent] = min(widths[agent], _AGENT_CAP[wide])
        room = columns - sum(widths) - 2 * len(widths)  # one space each side between columns
        if room >= MIN_TITLE or not wide:
            break
        wide = False  # whole ids leave the title no room: the narrow layout
    t = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for head, size in zip(heads, widths, strict=True):
        justify: Literal["left", "right"] = "right" if head in _RIGHT else "left"
        t.add_column(head, width=size, justify=justify, no_wrap=True, overflow="ellipsis")
    t.add_column("title", width=max(min(room, longest), 10), no_wrap=True, overflow="ellipsis")
    for row in cells:
        t.add_row(*(Text(safe(cell)) for cell in row))
    return t


def hint(page: SessionPage, chosen: Listing) -> str | None:
    """What the page left out, and the options that show it; None when nothing was."""
    if page.total and not page.sessions:
        last = -(-page.total // chosen.limit) if chosen.limit else 1
        return f"page {chosen.page} is past the last ({last}); {page.total} session(s) in all"
    if not page.remaining:
        return None
    after = chosen.page + 1
    following = min(page.remaining, chosen.limit or page.remaining)
    return (
        f"{page.remaining} more — --page {after} for the next {following}, "
        "--limit N for N a page, --all for every one"
    )
