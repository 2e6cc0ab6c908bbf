"""Summary nodes of the dag engine, and the coordination rows its compaction needs (DAG-1..9).

Rows never change once written (a row's ``frontier`` column, the frontier once it is stored,
is filled in by the transaction that inserts it). A leaf stands for whole steps
``first_seq..last_seq`` and must start exactly where the coverage so far ends; a condensed
node names its children (adjacent frontier nodes of one depth) in ``summary_children``, whose
``child_id`` is unique, so no node is condensed twice. Both rules are checked inside the
writing transaction, under the session's write lock, so two processes racing to compact one
session store one summary per chunk and the loser gets :class:`SummaryConflict`. The summary,
its edges and its full-text row commit together: a crash leaves the old state.

The compaction's coordination rows (lease, summarizer spend, breaker) are in :mod:`._coordination`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import LedgerError, UserError
from ..messages import canonical_json, load_json, sha256_hex
from ._model import Fault, Scope, SummaryRecord
from ._rows import (
    COLUMNS,
    SEALED,
    body_matches,
    check_body,
    check_seal,
    load_column,
    seal_matches,
    seal_row,
)
from ._seal import Sealer
from ._store import StoreBase

if TYPE_CHECKING:
    from ._db import Db

KINDS = ("leaf", "condensed")
LEVELS = ("normal", "aggressive", "count-only")


class SummaryConflict(LedgerError):
    """A summary that would overlap, skip or re-condense what is already summarized: another
    process got there first (or the job was planned from a stale view). Nothing was written."""

    code = "SUMMARY_CONFLICT"


@dataclass(frozen=True, slots=True)
class SummaryInput:
    """A summary to store; the ledger counts its tokens and digests its text."""

    kind: str
    depth: int
    first_seq: int
    last_seq: int
    children: tuple[int, ...]
    descendant_count: int
    descendant_tokens: int
    time_range: tuple[str, str]
    text: str
    summarizer: str
    level: str
    sources_digest: str
    meta: dict[str, Any] = field(default_factory=dict)


def summary_from_row(sealer: Sealer, r: Sequence[Any], children: tuple[int, ...]) -> SummaryRecord:
    """A row of ``COLUMNS["summaries"]`` as a value, its seal and body digest checked."""
    row_id, body = r[18], r[19]
    check_seal(sealer, "summaries", r, row_id, r[0])
    check_body("summaries", r, r[12], body, row_id)
    meta = load_column("summaries", r[14], row_id, r[0])
    return SummaryRecord(
        int(row_id), r[0], int(r[1]), r[2], int(r[3]), int(r[4]), children, int(r[5]), int(r[6]),
        (r[7], r[8]), int(r[9]), r[10], r[11], r[12], r[13], body, meta, r[15],
    )  # fmt: skip


def _children_of(c: Db, ids: Sequence[int]) -> dict[int, tuple[int, ...]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for k in range(0, len(ids), 500):
        chunk = list(ids[k : k + 500])
        marks = ",".join("?" * len(chunk))
        for parent, child, pos in c.execute(
            "SELECT parent_id, child_id, position FROM summary_children"
            f" WHERE parent_id IN ({marks})",
            chunk,
        ).fetchall():
            out.setdefault(int(parent), []).append((int(pos), int(child)))
    return {p: tuple(ch for _, ch in sorted(v)) for p, v in out.items()}


def summary_rows(c: Db, sealer: Sealer, where: str, args: Sequence[Any]) -> list[SummaryRecord]:
    """The summaries ``where`` selects (``s`` is the table), by coverage then depth."""
    rows = c.execute(
        f"SELECT {COLUMNS['summaries']} FROM summaries s WHERE {where}"
        " ORDER BY s.first_seq, s.depth",
        tuple(args),
    ).fetchall()
    kids = _children_of(c, [int(r[18]) for r in rows if r[2] == "condensed"])
    return [summary_from_row(sealer, r, kids.get(int(r[18]), ())) for r in rows]


class Summaries(StoreBase):
    """Summary nodes: writes under the rules above, the frontier, verify."""

    # -- summaries --------------------------------------------------------------------------
    def add_summary(self, scope: Scope, draft: SummaryInput) -> SummaryRecord:
        """Store one summary with its edges and full-text row in one transaction.

        Raises :class:`SummaryConflict` when the coverage is not what the rules above allow
        (nothing is written), :class:`~comal.errors.UserError` for a malformed draft."""
        _check_draft(draft)
        tokens = self.counter.count(draft.text)
        digest = sha256_hex(draft.text)
        created = _iso_now()
        with self.atomic() as c:
            if self._session_row(scope, lock=True) is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            if draft.kind == "leaf":
                self._check_leaf(c, scope, draft)
            else:
                self._check_condensed(c, scope, draft)
            before = self._frontier_ids(c, scope)
            children = set(draft.children)
            d = draft
            row: tuple[Any, ...] = (scope.session, d.depth, d.kind, d.first_seq, d.last_seq)
            row += (d.descendant_count, d.descendant_tokens, *d.time_range, tokens, d.summarizer)
            row += (d.level, digest, created, canonical_json(d.meta), d.sources_digest)
            sid = int(
                c.execute(
                    f"INSERT INTO summaries ({', '.join(SEALED['summaries'])}, body) VALUES"
                    f" ({', '.join('?' * len(row))}, '[]', ?) RETURNING id",
                    (*row, d.text),
                ).fetchone()[0]
            )
            # Children leave the frontier and the new node takes the place of the first one (or
            # the end, for a leaf): the frontier stays in coverage order. The seal covers it.
            after = [i for i in before if i not in children]
            at = before.index(draft.children[0]) if draft.children else len(after)
            after.insert(at, sid)
            row += (canonical_json(after),)
            seal = seal_row(self._sealer, "summaries", row, sid)
            c.execute(
                "UPDATE summaries SET frontier = ?, seal = ? WHERE id = ?", (row[-1], seal, sid)
            )
            for pos, child in enumerate(draft.children):
                c.execute(
                    "INSERT INTO summary_children (parent_id, child_id, position) VALUES (?, ?, ?)",
                    (sid, child, pos),
                )
            self._dialect.index_text(c, "summaries_text_fts", scope.session, [(sid, draft.text)])
        record = summary_from_row(self._sealer, (*row, seal, sid, d.text), d.children)
        return replace(record, meta=dict(d.meta))

    def _check_leaf(self, c: Any, scope: Scope, d: SummaryInput) -> None:
        prev = c.execute(
            "SELECT max(last_seq) FROM summaries WHERE session_id = ?", (scope.session,)
        ).fetchone()[0]
        if prev is None:
            skipped = c.execute(
                "SELECT count(*) FROM entries WHERE session_id = ? AND seq < ?"
                " AND role NOT IN ('system', 'developer')",
                (scope.session, d.first_seq),
            ).fetchone()[0]
            if skipped:
                raise SummaryConflict(
                    f"a first leaf must start at the first non-system entry; seq {d.first_seq} "
                    f"would leave {skipped} entries uncovered"
                )
        elif d.first_seq != int(prev) + 1:
            raise SummaryConflict(
                f"leaf seq {d.first_seq}..{d.last_seq} does not start where the summaries end "
                f"(seq {int(prev) + 1}); another compaction got there first"
            )
        rows = c.execute(
            "SELECT seq, step FROM entries WHERE session_id = ? AND seq IN (?, ?) ORDER BY seq",
            (scope.session, d.first_seq, d.last_seq + 1),
        ).fetchall()
        found = {int(r[0]): int(r[1]) for r in rows}
        if found.get(d.first_seq) != d.first_seq:
            raise SummaryConflict(f"leaf must start at a step: seq {d.first_seq} is not one")
        if found.get(d.last_seq + 1) != d.last_seq + 1:
            raise SummaryConflict(
                f"leaf must end where a later step starts: seq {d.last_seq + 1} does not"
            )

    def _check_condensed(self, c: Any, scope: Scope, d: SummaryInput) -> None:
        marks = ",".join("?" * len(d.children))
        kids = c.execute(
            "SELECT s.id, s.depth, s.first_seq, s.last_seq, s.descendant_count,"
            " (SELECT count(*) FROM summary_children e WHERE e.child_id = s.id)"
            f" FROM summaries s WHERE s.session_id = ? AND s.id IN ({marks})",
            (scope.session, *d.children),
        ).fetchall()
        by_id = {int(r[0]): r for r in kids}
        if set(by_id) != set(d.children):
            raise UserError(f"condensed summary names children not in this session: {d.children}")
        ordered = [by_id[i] for i in d.children]
        if any(int(r[5]) for r in ordered):
            raise SummaryConflict(
                f"summaries {d.children} are already condensed; another compaction got there first"
            )
        if any(int(r[1]) != d.depth - 1 for r in ordered):
            below = d.depth - 1
            raise UserError(f"children of a depth-{d.depth} summary must all be depth {below}")
        for a, b in itertools.pairwise(ordered):
            if int(b[2]) != int(a[3]) + 1:
                raise UserError(f"children {d.children} are not adjacent")
        if int(ordered[0][2]) != d.first_seq or int(ordered[-1][3]) != d.last_seq:
            raise UserError("a condensed summary's range must be its children's")
        if sum(int(r[4]) for r in ordered) != d.descendant_count:
            raise UserError("descendant_count must be the children's sum")

    def _frontier_ids(self, c: Any, scope: Scope) -> list[int]:
        row = c.execute(
            "SELECT frontier FROM summaries WHERE session_id = ? ORDER BY id DESC LIMIT 1",
            (scope.session,),
        ).fetchone()
        return [] if row is None else [int(i) for i in load_json(row[0])]

    def summary_frontier(self, scope: Scope) -> list[SummaryRecord]:
        """The summaries no other one condenses, oldest first (the dag engine's stand-ins).

        Read from the frontier the newest summary recorded: O(frontier) rows, whatever the
        session's length (``verify`` checks it against the edges)."""
        with self._reading() as c:
            if not self._visible(scope):
                return []
            ids = self._frontier_ids(c, scope)
            if not ids:
                return []
            marks = ",".join("?" * len(ids))
            return summary_rows(
                c, self._sealer, f"s.session_id = ? AND s.id IN ({marks})", (scope.session, *ids)
            )

    def summaries(self, scope: Scope) -> list[SummaryRecord]:
        """Every summary of the session, by coverage then depth."""
        with self._reading() as c:
            if not self._visible(scope):
                return []
            return summary_rows(c, self._sealer, "s.session_id = ?", (scope.session,))

    def summary(self, scope: Scope, summary_id: int) -> SummaryRecord | None:
        with self._reading() as c:
            if not self._visible(scope):
                return None
            found = summary_rows(
                c, self._sealer, "s.session_id = ? AND s.id = ?", (scope.session, summary_id)
            )
        return found[0] if found else None

    def summary_parent(self, scope: Scope, summary_id: int) -> int | None:
        with self._reading() as c:
            if not self._visible(scope):
                return None
            row = c.execute(
                "SELECT e.parent_id FROM summary_children e JOIN summaries s"
                " ON s.id = e.child_id WHERE e.child_id = ? AND s.session_id = ?",
                (summary_id, scope.session),
            ).fetchone()
        return None if row is None else int(row[0])

    # -- verify -----------------------------------------------------------------------------
    def summary_faults(self) -> list[Fault]:
        """``verify``'s part for summaries: each row matches its seal and its body its digest,
        leaves of a session cover adjacent whole ranges, a condensed node's children are
        adjacent, one depth lower and span exactly its range, and each session's newest row
        records the frontier the edges give."""
        with self._reading() as c:
            order = "session_id, first_seq, depth"
            rows = c.execute(f"SELECT {COLUMNS['summaries']} FROM summaries ORDER BY {order}")
            rows = rows.fetchall()
            edges = c.execute("SELECT parent_id, child_id, position FROM summary_children")
            kids: dict[int, list[tuple[int, int]]] = {}
            for parent, child, pos in edges.fetchall():
                kids.setdefault(int(parent), []).append((int(pos), int(child)))
        faults: list[Fault] = []

        def fault(r: Sequence[Any], kind: str, detail: str, seq: Any = None) -> None:
            faults.append(Fault(r[0], seq, kind, f"summary {r[18]} {detail}", "summaries", r[18]))

        nodes = {int(r[18]): r for r in rows}
        condensed = {child for found in kids.values() for _, child in found}
        last_end: dict[str, int] = {}
        newest: dict[str, Sequence[Any]] = {}
        for r in rows:
            sid, kind, depth, first, last = r[0], r[2], int(r[1]), int(r[3]), int(r[4])
            if sid not in newest or int(r[18]) > int(newest[sid][18]):
                newest[sid] = r
            if not seal_matches(self._sealer, "summaries", r):
                fault(r, "seal", "does not match its seal", first)
            if not body_matches(r[19], r[12]):
                fault(r, "summary-digest", "body does not match", first)
            if kind == "leaf":
                end = last_end.get(sid)
                if end is not None and first != end + 1:
                    fault(r, "summary-gap", f"starts at {first}, after {end}", first)
                last_end[sid] = last
                continue
            found = [nodes.get(ch) for _, ch in sorted(kids.get(int(r[18]), []))]
            real = [ch for ch in found if ch is not None]
            if not (
                len(real) == len(found) >= _least_children(r[14], found)
                and all(int(ch[1]) == depth - 1 and ch[0] == sid for ch in real)
                and (int(real[0][3]), int(real[-1][4])) == (first, last)
                and all(int(b[3]) == int(a[4]) + 1 for a, b in itertools.pairwise(real))
            ):
                fault(r, "summary-children", "has children that do not span it", first)
        for sid, r in newest.items():
            want = sorted(
                (int(x[3]), int(x[18])) for x in rows if x[0] == sid and int(x[18]) not in condensed
            )
            if [i for _, i in want] != [int(i) for i in load_json(r[16])]:
                fault(r, "summary-frontier", "records a wrong frontier")
        return faults


def _least_children(meta: object, found: Sequence[Any]) -> int:
    """Two, or one for a node that rebuilds a bad summary (``comal doctor --rebuild``: the
    meta names that child)."""
    named = load_json(meta).get("rebuilds") if isinstance(meta, str) else None
    one = [int(ch[18]) for ch in found if ch is not None]
    return 1 if isinstance(named, int) and one == [named] else 2


def _check_draft(d: SummaryInput) -> None:
    problems = []
    if d.kind not in KINDS:
        problems.append(f"kind must be one of {KINDS}")
    if d.level not in LEVELS:
        problems.append(f"level must be one of {LEVELS}")
    if (d.kind == "leaf") != (d.depth == 0):
        problems.append("a leaf has depth 0 and only a leaf has")
    if d.kind == "leaf" and d.children:
        problems.append("a leaf has no children")
    rebuilds = len(d.children) == 1 and d.meta.get("rebuilds") == d.children[0]
    if d.kind == "condensed" and len(d.children) < 2 and not rebuilds:
        problems.append(
            "a condensed summary has at least two children (one only when it rebuilds it)"
        )
    if not 0 <= d.first_seq <= d.last_seq:
        problems.append("need 0 <= first_seq <= last_seq")
    if d.kind == "leaf" and d.descendant_count != d.last_seq - d.first_seq + 1:
        problems.append("a leaf's descendant_count is the number of entries it covers")
    if not d.text.strip():
        problems.append("the text is empty")
    if problems:
        raise UserError("bad summary: " + "; ".join(problems))


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
