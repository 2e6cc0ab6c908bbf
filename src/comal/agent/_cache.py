"""The prompt cache, watched: the cache-break detector (CCH-1) and adaptive retention (CCH-4).

**Cache-break detector.** A provider's prompt cache is hit only while each request starts with
the bytes of the one before. :class:`Prefix` is one request's prefix as a list of part digests
in the order providers cache them — ``system``, ``tools``, then every message — and
:class:`CacheWatch` compares each request's prefix with the previous one's. The first part that
differs, within what the previous request sent, is a break. A break is *announced* when a
deliberate edit explains it: a checkpoint stored this turn, an engine action first reported
after the previous request (a reference, a bound, a placeholder, a summary) at or before that
part, a change of the tool catalog the deferral made and recorded this turn, or a change of
model (another model has another cache). An announced break is recorded as a ``cache_edit``
event with its reason; any other one as a ``cache_break`` event naming the part (``system``,
``tools`` or ``message N`` with its entry id), which is the bug CCH-1 is about — a timestamp
in the system prompt, a tool list in another order, an old message rewritten silently.

Cost per turn stays flat: a message sent exactly as stored (the engine hands the stored
:class:`~comal.messages.Message` object on) takes the entry's stored digest, so only rewritten
messages (references, bounds, stand-ins) are hashed; the previous prefix is kept in memory, and
its compact form — the part count, the system and tools digests and a chained digest at
positions spaced exponentially back from the end, O(log n) of them — goes into the request's
meta for a resumed process. From the compact form a break is placed exactly near the end (where
edits happen) and within a range further back (``range`` in the event).

**Adaptive retention.** Anthropic cache breakpoints start with the 5-minute lifetime and move to
the 1-hour one once the session has made ``promote_after_turns`` requests; the promotion is an
event (``cache_retention``), so a resumed process keeps it, and it is never undone within the
session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..context import Action, Assembly, Checkpointed, ReplayTurn, View
from ..ledger import Entry, RequestRecord
from ..messages import Message, canonical_json, message_to_json, sha256_hex
from ..tokens import recorded_saving
from ..turns import action_kind, is_new

__all__ = [
    "CACHE_BREAK_EVENT",
    "CACHE_EDIT_EVENT",
    "RETENTION_EVENT",
    "CacheConfig",
    "CacheWatch",
    "Finding",
    "Prefix",
    "Retention",
    "explain",
    "request_saving",
    "session_saving",
    "stand_ins",
    "watch_replay",
]

CACHE_BREAK_EVENT = "cache_break"
CACHE_EDIT_EVENT = "cache_edit"
RETENTION_EVENT = "cache_retention"
Ttl = Literal["5m", "1h"]
SHORT_TTL: Ttl = "5m"
LONG_TTL: Ttl = "1h"
_CHAIN = 16  # hex digits of a chained digest kept in memory and meta


class CacheConfig(BaseModel):
    """Prompt-cache settings (operator-only, CFG-2): retention (CCH-4), tool deferral (CCH-3)
    and the cache-break detector (CCH-1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    adaptive_retention: bool = Field(
        default=True,
        description="Start Anthropic cache breakpoints at the 5-minute TTL and promote them to "
        "1 hour once the session proves active; off: the provider's default TTL.",
    )
    promote_after_turns: int = Field(
        default=3,
        ge=1,
        le=1_000,
        description="Model requests a session makes before its breakpoints move to the 1-hour "
        "TTL (never back within the session).",
    )
    tool_deferral: bool = Field(
        default=True,
        description="Hide verbose tools behind ToolSearch when tool definitions exceed "
        "deferral_threshold of the window.",
    )
    deferral_threshold: float = Field(
        default=0.10,
        ge=0.01,
        le=0.9,
        description="Share of the effective window the tool definitions may take before "
        "verbose tools are deferred.",
    )
    verbose_tool_tokens: int = Field(
        default=500,
        ge=50,
        le=100_000,
        description="A tool whose definition (name, description, schema) counts at least this "
        "many tokens is verbose and may be deferred; MCP tools are deferred first.",
    )
    recent_tool_turns: int = Field(
        default=10,
        ge=0,
        le=10_000,
        description="Tools called in this many recent assistant turns stay visible when the "
        "deferral is planned.",
    )
    detect_breaks: bool = Field(
        default=True,
        description="Compare each request's prefix with the previous one and record "
        "cache_break / cache_edit events.",
    )


def _chain(before: str, digest: str) -> str:
    return hashlib.sha256(f"{before}:{digest}".encode()).hexdigest()[:_CHAIN]


def message_digest(message: Message, entry: Entry | None) -> str:
    """The sha256 of ``message``'s canonical JSON; a message sent as stored takes its entry's
    digest (the same function of the same bytes, computed at append)."""
    if entry is not None and entry.message is message:
        return entry.digest
    return sha256_hex(message_to_json(message))


def part_name(index: int) -> str:
    if index == 0:
        return "system"
    if index == 1:
        return "tools"
    return f"message {index - 2}"


@dataclass(frozen=True, slots=True)
class Prefix:
    """One request's prefix: ``digests`` of system, tools and each message in order;
    ``entry_ids`` the ledger entry each message stands for (``None``: a stand-in, or system
    and tools); ``chain`` the chained digest after each part."""

    model: str
    digests: tuple[str, ...]
    entry_ids: tuple[int | None, ...]
    chain: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def of(
        cls,
        model: str,
        system: str,
        tools: str,
        messages: Sequence[Message],
        entry_ids: Sequence[int | None],
        entries: Mapping[int, Entry],
        *,
        previous: Prefix | None = None,
    ) -> Prefix:
        """The prefix of a request; ``tools`` is the sent tools' digest. With ``previous``,
        the chain is reused over the leading parts both share."""
        digests = [sha256_hex(system), tools]
        for message, eid in zip(messages, entry_ids, strict=True):
            digests.append(message_digest(message, entries.get(eid) if eid is not None else None))
        same = previous.common(digests) if previous is not None else 0
        chain = list(previous.chain[:same]) if previous is not None else []
        before = chain[-1] if chain else ""
        for digest in digests[same:]:
            before = _chain(before, digest)
            chain.append(before)
        ids = (None, None, *entry_ids)
        return cls(model, tuple(digests), ids, tuple(chain))

    def common(self, digests: Sequence[str]) -> int:
        """How many leading parts ``digests`` shares with this prefix."""
        n = min(len(self.digests), len(digests))
        if list(self.digests[:n]) == list(digests[:n]):
            return n
        return next(i for i in range(n) if self.digests[i] != digests[i])

    def compact(self) -> dict[str, Any]:
        """The form kept in the request's meta: O(log n) chained digests, dense at the end."""
        n = len(self.digests)
        points: list[int] = []
        step = 1
        at = n - 1
        while at >= 0:
            points.append(at)
            at = n - 1 - step
            step *= 2
        if 1 < n and 1 not in points:
            points.append(1)
        if 0 not in points and n:
            points.append(0)
        marks = [[i, self.chain[i]] for i in sorted(set(points))]
        return {
            "v": 1,
            "model": self.model,
            "parts": n,
            "system": self.digests[0][:_CHAIN] if n else "",
            "tools": self.digests[1][:_CHAIN] if n > 1 else "",
            "marks": marks,
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """The first part of the previous request's prefix that this request does not repeat.

    ``index`` counts parts (0 system, 1 tools, 2 + N message N); ``upto`` is the last part
    the break may be at when only the compact form of the previous request was known (equal to
    ``index`` when exact); ``reason`` says what announced it (``None``: unannounced)."""

    index: int
    upto: int
    entry_id: int | None
    model_changed: bool = False
    reason: str | None = None

    @property
    def part(self) -> str:
        return part_name(self.index)

    @property
    def announced(self) -> bool:
        return self.reason is not None

    def event(self, at_seq: int) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"v": 1, "at_seq": at_seq, "part": self.part}
        if self.index >= 2:
            body["message"] = self.index - 2
            body["entry_id"] = self.entry_id
        if self.upto != self.index:
            body["range"] = [part_name(self.index), part_name(self.upto)]
        if self.reason is not None:
            return CACHE_EDIT_EVENT, body | {"reason": self.reason}
        return CACHE_BREAK_EVENT, body


@dataclass
class CacheWatch:
    """Compares each request's prefix with the previous one (see the module docstring)."""

    previous: Prefix | None = None

    def compare(self, current: Prefix, meta: Mapping[str, Any] | None = None) -> Finding | None:
        """The break between the previous prefix (in memory, else ``meta["prefix"]`` of the
        previous request record) and ``current``; ``None`` when the whole previous prefix is
        repeated, or when there is nothing to compare with."""
        before = self.previous
        if before is not None:
            changed = before.model != current.model
            same = before.common(current.digests)
            if same >= min(len(before.digests), len(current.digests)):
                return None
            eid = current.entry_ids[same] if same < len(current.entry_ids) else None
            return Finding(same, same, eid, changed)
        compact = (meta or {}).get("prefix")
        if not isinstance(compact, Mapping) or compact.get("v") != 1:
            return None
        return _against_compact(current, compact)

    def accept(self, current: Prefix) -> None:
        """``current`` was sent: it is the prefix the next request is compared with."""
        self.previous = current


def _against_compact(current: Prefix, compact: Mapping[str, Any]) -> Finding | None:
    changed = compact.get("model") != current.model
    parts = min(int(compact.get("parts", 0)), len(current.digests))
    if parts == 0:
        return None
    if compact.get("system") != current.digests[0][:_CHAIN]:
        return Finding(0, 0, None, changed)
    if parts > 1 and compact.get("tools") != current.digests[1][:_CHAIN]:
        return Finding(1, 1, None, changed)
    matched = 1
    for raw in compact.get("marks", []):
        at, digest = int(raw[0]), str(raw[1])
        if at >= parts:
            break
        if at <= matched:
            continue
        if current.chain[at] != digest:
            index = matched + 1
            eid = current.entry_ids[index] if index < len(current.entry_ids) else None
            return Finding(index, at, eid, changed)
        matched = at
    return None


def _seq(action: Action) -> int | None:
    for name in ("seq", "first_seq"):
        value = getattr(action, name, None)
        if isinstance(value, int):
            return value
    return None


def explain(
    finding: Finding,
    *,
    assembly: Assembly,
    since: int,
    entries: Mapping[int, Entry],
    tools_change: str | None = None,
    checkpoint_stored: bool = False,
    stand_ins_changed: bool = False,
    system_change: str | None = None,
) -> Finding:
    """``finding`` with the reason of the deliberate edit that announces it, if there is one:
    ``since`` is the previous request's last seq (what is new is after it);
    ``stand_ins_changed`` says a checkpoint or summary the view reads in front of the history
    was stored since the previous request (maintenance between turns); ``system_change`` why
    the system prompt is not the previous request's (instruction files, DRV-1)."""
    reason: str | None = None
    if finding.model_changed:
        reason = "model changed (each model has its own cache)"
    elif finding.index == 0 and system_change is not None:
        reason = system_change
    elif finding.index == 1 and tools_change is not None:
        reason = tools_change
    elif finding.index >= 2:
        if checkpoint_stored:
            reason = "checkpoint stored"
        elif stand_ins_changed:
            reason = "new checkpoint or summary in front of the history"
        else:
            entry = entries.get(finding.entry_id) if finding.entry_id is not None else None
            point = entry.seq if entry is not None else None
            kinds = sorted(
                {
                    action_kind(a)
                    for a in assembly.actions
                    if is_new(a, since) and _at_or_before(a, point, finding.entry_id, entries)
                }
            )
            if kinds:
                reason = "new " + ", ".join(kinds)
    if reason is None:
        return finding
    return Finding(finding.index, finding.upto, finding.entry_id, finding.model_changed, reason)


def _at_or_before(
    action: Action, point: int | None, entry_id: int | None, entries: Mapping[int, Entry]
) -> bool:
    if isinstance(action, Checkpointed) or point is None:
        # A new stand-in covers the start; a changed stand-in is explained by any new action.
        return True
    eid = getattr(action, "entry_id", None)
    if isinstance(eid, int) and eid == entry_id:
        return True
    seq = _seq(action)
    if seq is None and isinstance(eid, int) and eid in entries:
        seq = entries[eid].seq
    return seq is None or seq <= point


def tools_digest(tools: Sequence[Mapping[str, Any]]) -> str:
    """The digest of the tool definitions exactly as sent (canonical JSON, in order)."""
    return sha256_hex(canonical_json([dict(t) for t in tools]))


@dataclass
class Retention:
    """CCH-4: the TTL of this session's cache breakpoints. ``promoted`` is read from the
    ledger's ``cache_retention`` event once (``None`` until then)."""

    config: CacheConfig
    promoted: bool | None = None

    def ttl(self, requests_made: int) -> tuple[Ttl | None, bool]:
        """(the TTL of the next request, whether it is promoted by this very request)."""
        if not self.config.adaptive_retention:
            return None, False
        if self.promoted:
            return LONG_TTL, False
        if requests_made >= self.config.promote_after_turns:
            self.promoted = True
            return LONG_TTL, True
        return SHORT_TTL, False


def request_saving(record: RequestRecord) -> float | None:
    """The ``savedVsUncached`` of one request record: the value stored in its meta when it was
    recorded, else computed from its measured usage (imported transcripts)."""
    r = record
    return recorded_saving(r.meta, r.model, r.new_input, r.cache_read, r.cache_write)


def session_saving(records: Iterable[RequestRecord]) -> float | None:
    """The sum of the requests' ``savedVsUncached`` where known; ``None`` when none is."""
    known = [s for s in (request_saving(r) for r in records) if s is not None]
    return round(sum(known), 6) if known else None


def stand_ins(view: View) -> list[int | None]:
    """The ids of the stand-ins ``view`` reads in front of its entries (checkpoint, then the
    summary frontier): when they change, the start of the history changed deliberately."""
    return [view.checkpoint.id if view.checkpoint is not None else None] + [
        s.id for s in view.summaries
    ]


def watch_replay(
    turns: Iterable[ReplayTurn],
    *,
    model: str,
    system: str,
    tools: str,
    entries: Sequence[Entry],
) -> Iterator[tuple[ReplayTurn, Finding | None]]:
    """The detector over a replay (:func:`comal.turns.replay`): each turn's request —
    ``system`` text, the ``tools`` digest, the assembled messages — compared with the previous
    turn's and explained by that turn's actions and stored stand-ins, as the agent would."""
    by_id = {e.id: e for e in entries}
    watch = CacheWatch()
    since = -1
    for turn in turns:
        assembly = turn.assembly
        if assembly is None:
            yield turn, None
            continue
        prefix = Prefix.of(
            model,
            system,
            tools,
            assembly.messages[1:],
            assembly.entry_ids[1:],
            by_id,
            previous=watch.previous,
        )
        finding = watch.compare(prefix)
        if finding is not None:
            finding = explain(
                finding,
                assembly=assembly,
                since=since,
                entries=by_id,
                checkpoint_stored=assembly.checkpoint_to_store is not None,
                stand_ins_changed=bool(turn.made),
            )
        watch.accept(prefix)
        since = turn.seq - 1
        yield turn, finding
