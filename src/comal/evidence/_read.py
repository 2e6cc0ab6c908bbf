"""Paged, exact reads of stored evidence (EVI-1..4).

A page is a slice of the stored string by UTF-16 units, never longer than 8,000 units, and ends
before a surrogate pair rather than inside one; joining the pages of ``next_call`` after
``next_call`` gives the stored string back exactly (same sha256). Nothing is ever synthesised:
when a check fails the read raises and returns no text.

A ``regex`` search runs on RE2, in time linear in the text whatever the pattern (``(a+)+$``
cannot stall a read); a pattern RE2 cannot run (backreferences, lookaround) is an
:class:`EvidenceArgumentError`, never handed to a backtracking engine.

Access (EVI-3): the reading session may read its own entries and those of its direct children
(``ledger.children``); every other session reads nothing, whether or not the entry exists there.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

import re2

from .._regex import PatternError, compile_linear, searchable
from ..ledger import Entry, Scope, SessionInfo
from ..messages import sha256_hex
from ._args import MAX_PAGE_UNITS, EvidenceReadArgs, Target, evidence_call
from ._errors import (
    EvidenceArgumentError,
    EvidenceCorrupt,
    EvidenceDigestMismatch,
    EvidenceNotAllowed,
    EvidenceNotFound,
)
from ._fields import CONTENT, field_text
from ._utf16 import is_pair_split, to_utf16_offsets, utf16_encode

__all__ = ["EvidencePage", "EvidenceSource", "read_evidence", "read_with_args"]

# A search page starts this many units (at most a quarter of the page) before the first match,
# so the match is read with the lines that lead to it.
_SEARCH_LEAD = 200


class EvidenceSource(Protocol):
    """The two ledger reads evidence needs (any :class:`~comal.ledger.LedgerBackend` has them)."""

    def entry(self, scope: Scope, entry_id: int) -> Entry | None: ...
    def children(self, scope: Scope) -> list[SessionInfo]: ...


@dataclass(frozen=True, slots=True)
class EvidencePage:
    """One page of a stored field. ``digest`` is the sha256 of the *whole* field, ``offset`` and
    ``end`` bound this page in UTF-16 units, ``matches`` are the offsets of every search match."""

    text: str
    digest: str
    offset: int
    end: int
    total_utf16: int
    next_call: str | None
    matches: tuple[int, ...] = ()
    entry_id: int = 0
    field: str = CONTENT
    session: str | None = None
    target: Target = "entry"

    def render(self) -> str:
        """The page as the model reads it: a one-line header, the exact text, the next call."""
        where = f", session {self.session}" if self.session is not None else ""
        head = (
            f"[EvidenceRead {self.target} {self.entry_id}{where}, field {self.field!r}: "
            f"UTF-16 units {self.offset}..{self.end} of {self.total_utf16}, sha256 {self.digest}"
        )
        if self.matches:
            shown = ", ".join(str(m) for m in self.matches[:50])
            more = f" (+{len(self.matches) - 50} more)" if len(self.matches) > 50 else ""
            head += f"; {len(self.matches)} matches at {shown}{more}"
        tail = f"[next page: {self.next_call}]" if self.next_call else "[end of the stored text]"
        return f"{head}]\n{self.text}\n{tail}"


def _allowed(
    ledger: EvidenceSource, scope: Scope, allowed_sessions: Collection[str] | None
) -> list[Scope]:
    """The own scope, then direct children by id; ``allowed_sessions`` narrows, never widens."""
    scopes = [scope, *sorted((c.scope for c in ledger.children(scope)), key=lambda s: s.session)]
    if allowed_sessions is not None:
        keep = set(allowed_sessions)
        scopes = [s for s in scopes if s.session in keep]
    return scopes


def _find(
    ledger: EvidenceSource,
    scope: Scope,
    entry_id: int,
    session: str | None,
    scopes: list[Scope],
    target: Target,
) -> tuple[Entry, Scope]:
    if session is not None:
        scopes = [s for s in scopes if s.session == session]
        if not scopes:
            raise EvidenceNotAllowed(
                f"session {session} is neither this session ({scope.session}) nor one of its "
                "direct children, so its evidence cannot be read here; read it from that "
                "session or its parent"
            )
    for where in scopes:
        found = ledger.entry(where, entry_id)
        if found is not None:
            return found, where
    raise EvidenceNotFound(
        f"no {target} {entry_id} in session {session or scope.session}"
        + ("" if session else " or its direct children")
        + f"; copy the {target} id from the reference exactly"
    )


def _compile(search: str) -> re2._Regexp[str]:
    try:
        return compile_linear(search)
    except PatternError as exc:
        raise EvidenceArgumentError(f"{exc}; or pass regex=false") from None


def _matches(text: str, search: str, regex: bool) -> tuple[int, ...]:
    if regex:
        indices = [m.start() for m in _compile(search).finditer(searchable(text))]
    else:
        indices = []
        at = text.find(search)
        while at >= 0:
            indices.append(at)
            at = text.find(search, at + len(search))
    return to_utf16_offsets(text, indices)


def read_evidence(
    ledger: EvidenceSource,
    scope: Scope,
    entry_id: int,
    *,
    field: str = CONTENT,
    offset: int = 0,
    limit: int = MAX_PAGE_UNITS,
    search: str | None = None,
    regex: bool = False,
    expected_digest: str | None = None,
    allowed_sessions: Collection[str] | None = None,
    session: str | None = None,
    target: Target = "entry",
) -> EvidencePage:
    """One exact page of ``field`` of entry ``entry_id``; see the module docstring.

    ``target`` is what ``entry_id`` numbers for the reader: the next call and the page's
    header name a ``record`` when ``ledger`` presents stored output records as entries.

    ``session`` names a direct child whose entry is wanted; without it the own session is tried
    first, then the children. ``limit`` above 8,000 is cut to 8,000. With ``search`` the page
    starts shortly before the first match at or after ``offset``, and ``matches`` lists every
    match in the whole field; without a match the page is empty.
    """
    if offset < 0 or limit < 1:
        raise EvidenceArgumentError(
            f"offset must be >= 0 and limit >= 1 (got offset={offset}, limit={limit})"
        )
    if search is not None and not search:
        raise EvidenceArgumentError("search must not be empty; leave it out to read by offset")
    entry, found_in = _find(
        ledger, scope, entry_id, session, _allowed(ledger, scope, allowed_sessions), target
    )
    name, text = field_text(entry.message, field, entry_id=entry_id)
    digest = sha256_hex(text)
    if name == CONTENT and entry.output_digest is not None and digest != entry.output_digest:
        raise EvidenceCorrupt(
            f"{target} {entry_id}'s stored output hashes to {digest}, not its recorded "
            f"{entry.output_digest}; the ledger is damaged: run `comal verify`"
        )
    if expected_digest is not None and expected_digest != digest:
        raise EvidenceDigestMismatch(
            f"{target} {entry_id} field {name!r} has sha256 {digest}, not the expected "
            f"{expected_digest}; the reference names other bytes, so nothing was read. Use the "
            "digest from the current reference, or read without expected_digest"
        )
    data = utf16_encode(text)
    total = len(data) // 2
    if offset > total:
        raise EvidenceArgumentError(
            f"offset {offset} is past the end of {target} {entry_id} field {name!r} "
            f"({total} UTF-16 units); read from an offset below {total}"
        )
    limit = min(limit, MAX_PAGE_UNITS)
    matches: tuple[int, ...] = ()
    start = offset
    child = found_in.session if found_in.session != scope.session else None
    if search is not None:
        matches = _matches(text, search, regex)
        first = next((m for m in matches if m >= offset), None)
        if first is None:  # no match at or after offset: an empty page says so
            return EvidencePage(
                "", digest, offset, offset, total, None, matches, entry_id, name, child, target
            )
        start = max(offset, first - min(_SEARCH_LEAD, limit // 4))
    if is_pair_split(data, start):
        start -= 1  # an offset inside a pair starts the page at the pair
    end = min(start + limit, total)
    if is_pair_split(data, end):
        # Never cut a pair; only a 1-unit page on an astral character must grow to 2 units.
        end = end - 1 if end - 1 > start else end + 1
    page = data[2 * start : 2 * end].decode("utf-16-le", "surrogatepass")
    following = None
    if end < total:
        following = evidence_call(entry_id, name, digest, session=child, offset=end, target=target)
    return EvidencePage(
        page, digest, start, end, total, following, matches, entry_id, name, child, target
    )


def read_with_args(
    ledger: EvidenceSource,
    scope: Scope,
    args: EvidenceReadArgs,
    *,
    allowed_sessions: Collection[str] | None = None,
) -> EvidencePage:
    """:func:`read_evidence` driven by validated operation arguments."""
    return read_evidence(
        ledger,
        scope,
        args.entry,
        field=args.field,
        offset=args.offset,
        limit=args.limit,
        search=args.search,
        regex=args.regex,
        expected_digest=args.expected_digest,
        allowed_sessions=allowed_sessions,
        session=args.session,
    )
