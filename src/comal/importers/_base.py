"""What every importer shares: the result values, the fault policy and the session builder.

Parsers turn records into messages and hand them to a :class:`SessionBuilder`. The builder
settles tool pairs in one place (`finish`), so every format gets the same guarantees: a tool
result follows the step that made its call, and a call without a result is either kept open
(strict: the transcript ended there, the ledger reports it as paused) or closed with an explicit
marker (lenient), never silently dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from comal.errors import ImportFormatError
from comal.messages import Message, Part, Role, ToolCall, ToolResult

INTERRUPTED = "[interrupted: no result was recorded]"

# Where a record sits: a JSONL line number, or a JSON path inside a whole-file document.
At: TypeAlias = "int | tuple[str | int, ...] | None"


@dataclass(frozen=True)
class UsageRecord:
    """Token usage as the format recorded it, not yet normalised."""

    message_index: int  # index into ImportedSession.messages of the assistant message
    protocol: str  # "anthropic" | "openai_chat" | "openai_responses"
    raw: Mapping[str, Any]  # the usage object exactly as stored
    model: str | None


@dataclass(frozen=True)
class ImportedSession:
    """One conversation read from a file, ready for the ledger.

    ``meta`` always has ``skipped_records`` and ``closed_calls`` (lenient repairs; 0 when
    strict). When present: ``open_calls`` (strict: ids of calls the transcript ended on, a
    paused session), ``reordered_messages`` (user turns moved after the results their step was
    still waiting for), ``renamed_call_ids`` (reused ids made unique as ``<id>__<n>``),
    ``unattached_usage`` (usage records no message can own, kept as
    ``{"protocol", "raw", "model"}``), plus per-format facts (model, cwd, CLI version, exit
    status, skipped bookkeeping counts).
    """

    source: str
    format: str
    key: str
    title: str | None
    messages: tuple[Message, ...]
    usages: tuple[UsageRecord, ...]
    meta: Mapping[str, Any]
    parent_key: str | None = None
    warnings: tuple[str, ...] = ()
    # The transcript's own time of each message (ISO text, parallel to ``messages``), or None
    # where the format records none: kept as the entries' ``created_at``.
    times: tuple[str | None, ...] = ()


class RecordError(Exception):
    """One record is not what its format says (internal; the caller turns it into a fault)."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.field = field


_PATH_PART = re.compile(r"(\w+)|\[(\d+)\]")


def render_path(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class Faults:
    """The fault policy for one file: strict raises at the first fault, lenient warns and counts.

    Warnings are handed out to sessions with :meth:`drain`, so each warning lands in exactly one
    session: the one being built when it was raised (or the last one, for faults after it).
    """

    def __init__(self, path: str, lenient: bool) -> None:
        self.path = path
        self.lenient = lenient
        # Set by the JSON reader for whole-file documents: maps a JSON path to its line.
        self.locate: Callable[[tuple[str | int, ...]], int | None] | None = None
        self._warnings: list[str] = []
        self._skipped = 0
        self._closed = 0

    def where(self, at: At, field: str | None) -> tuple[int | None, str | None]:
        if isinstance(at, tuple):
            line = None
            if self.locate is not None:
                # The field's own line when it exists, else the line of its record.
                inner = tuple(int(i) if i else k for k, i in _PATH_PART.findall(field or ""))
                line = self.locate((*at, *inner)) or self.locate(at)
            prefix = render_path(at)
            return line, (f"{prefix}.{field}" if field else prefix) or None
        return at, field

    def bad(
        self, reason: str, *, at: At = None, field: str | None = None, kept: str | None = None
    ) -> None:
        """Damage: raise in strict mode. Lenient skips the record with a warning, or, when the
        caller could repair it, says what was ``kept``."""
        line, fld = self.where(at, field)
        if not self.lenient:
            raise ImportFormatError(
                f"{reason}. Repair or remove that record, or import with --lenient to skip it",
                path=self.path,
                line=line,
                field=fld,
            )
        if kept is None:
            self._skipped += 1
            self._warnings.append(f"{self._loc(line, fld)}: skipped: {reason}")
        else:
            self._warnings.append(f"{self._loc(line, fld)}: {reason}; {kept}")

    def fatal(
        self,
        reason: str,
        *,
        at: At = None,
        field: str | None = None,
        advice: str | None = "check that it is a transcript of the format given "
        "(leave --format out and the format is detected from the content)",
    ) -> ImportFormatError:
        """A fault nothing can be salvaged from, in either mode: nothing is imported."""
        line, fld = self.where(at, field)
        message = f"{reason}. Nothing was imported; {advice}" if advice else reason
        return ImportFormatError(message, path=self.path, line=line, field=fld)

    def repaired(self, what: str, *, at: At = None, field: str | None = None) -> None:
        """Lenient mode changed something to keep going (the caller checked ``lenient``)."""
        line, fld = self.where(at, field)
        self._warnings.append(f"{self._loc(line, fld)}: {what}")

    def closed(self, what: str, *, at: At = None) -> None:
        self._closed += 1
        self.repaired(what, at=at)

    def drain(self) -> tuple[tuple[str, ...], int, int]:
        out = (tuple(self._warnings), self._skipped, self._closed)
        self._warnings, self._skipped, self._closed = [], 0, 0
        return out

    def hand_over(self, sessions: list[ImportedSession]) -> list[ImportedSession]:
        """Give warnings raised after the last session was built (a torn final line in a
        one-session-per-line file) to that session; with no session at all, nothing was
        importable and that is an error even in lenient mode."""
        warnings, skipped, closed = self.drain()
        if not warnings:
            return sessions
        if not sessions:
            shown = "; ".join(warnings[:3]) + (
                f" (and {len(warnings) - 3} more)" if len(warnings) > 3 else ""
            )
            raise ImportFormatError(f"nothing could be imported: {shown}", path=self.path)
        last = sessions[-1]
        meta = dict(last.meta)
        meta["skipped_records"] = int(meta.get("skipped_records", 0)) + skipped
        meta["closed_calls"] = int(meta.get("closed_calls", 0)) + closed
        sessions[-1] = replace(last, warnings=last.warnings + warnings, meta=meta)
        return sessions

    def _loc(self, line: int | None, fld: str | None) -> str:
        loc = self.path if line is None else f"{self.path}:{line}"
        return f"{loc} ({fld})" if fld else loc


@dataclass
class _Draft:
    role: Role
    parts: list[Part]
    name: str | None
    at: At
    when: str | None = None


@dataclass
class SessionBuilder:
    """Collects messages and usage for one session; :meth:`finish` settles tool pairs."""

    faults: Faults
    _drafts: list[_Draft] = field(default_factory=list)
    _usage: dict[int, tuple[str, Mapping[str, Any], str | None]] = field(default_factory=dict)
    _unattached: list[dict[str, Any]] = field(default_factory=list)
    _call_at: dict[int, At] = field(default_factory=dict)  # id(call part) -> where written
    # The time of the record being read (ISO text), set by a parser before it adds what the
    # record holds: each message keeps the time of the record that first wrote it.
    when: str | None = None

    def __len__(self) -> int:
        return len(self._drafts)

    def add(self, role: Role, parts: list[Part], *, at: At = None, name: str | None = None) -> int:
        self._drafts.append(_Draft(role, list(parts), name, at, self.when))
        self._note_calls(parts, at)
        return len(self._drafts) - 1

    def tool(self, result: ToolResult, *, at: At = None) -> int:
        return self.add(Role.TOOL, [result], at=at)

    def extend(self, index: int, parts: list[Part], *, at: At = None) -> None:
        """Merge parts into an earlier message (one response written as several records)."""
        self._drafts[index].parts.extend(parts)
        self._note_calls(parts, at if at is not None else self._drafts[index].at)

    def _note_calls(self, parts: list[Part], at: At) -> None:
        for part in parts:
            if isinstance(part, ToolCall):
                self._call_at[id(part)] = at

    def usage(self, index: int, protocol: str, raw: Mapping[str, Any], model: str | None) -> None:
        """Record (or replace: later split lines carry the final counts) a message's usage."""
        self._usage[index] = (protocol, raw, model)

    def has_usage(self, index: int) -> bool:
        return index in self._usage

    def unattached(self, protocol: str, raw: Mapping[str, Any], model: str | None) -> None:
        """Usage with no assistant message to own it: kept in meta, not dropped."""
        self._unattached.append({"protocol": protocol, "raw": raw, "model": model})

    def finish(
        self,
        *,
        source: str,
        format: str,
        key: str,
        title: str | None = None,
        meta: Mapping[str, Any] | None = None,
        parent_key: str | None = None,
    ) -> ImportedSession:
        order, closing, reordered, renamed = self._settle()
        messages: list[Message] = []
        times: list[str | None] = []
        new_index: dict[int, int] = {}
        for item in order:
            if isinstance(item, int):
                d = self._drafts[item]
                if d.role is Role.ASSISTANT and not d.parts:
                    # A usage-only record (content not logged): nothing to show the model.
                    if item in self._usage:
                        protocol, raw, model = self._usage.pop(item)
                        self.unattached(protocol, raw, model)
                    continue
                new_index[item] = len(messages)
                messages.append(Message(d.role, tuple(d.parts), d.name))
                times.append(d.when)
            else:
                messages.append(Message(Role.TOOL, (item,)))
                times.append(None)  # a result written by the import: no time of its own
        usages = tuple(
            UsageRecord(new_index[i], protocol, raw, model)
            for i, (protocol, raw, model) in sorted(self._usage.items())
            if i in new_index
        )
        warnings, skipped, closed = self.faults.drain()
        out_meta = dict(meta or {})
        out_meta["skipped_records"] = skipped
        out_meta["closed_calls"] = closed
        if closing:
            out_meta["open_calls"] = closing
        if reordered:
            out_meta["reordered_messages"] = reordered
        if renamed:
            out_meta["renamed_call_ids"] = renamed
        if self._unattached:
            out_meta["unattached_usage"] = self._unattached
        return ImportedSession(
            source=source,
            format=format,
            key=key,
            title=title,
            messages=tuple(messages),
            usages=usages,
            meta=out_meta,
            parent_key=parent_key,
            warnings=warnings,
            times=tuple(times) if any(t is not None for t in times) else (),
        )

    def _settle(self) -> tuple[list[int | ToolResult], list[str], int, int]:
        """Order messages so each step's results follow it; deal with calls left open.

        A user/system message that arrives while a step still waits for results is moved after
        them (providers need results right after the call). Open calls followed by a later step
        are damage (strict raises); open calls at the very end are a paused session (strict keeps
        them open). Lenient closes both with an explicit error result.

        A call id used again by a later step (SWE-agent replays reuse them) is renamed
        ``<id>__<n>``, with its result, so an id names one pair in the session.
        """
        settle = _Settle(self.faults, self._call_at)
        for i, d in enumerate(self._drafts):
            if d.role is Role.TOOL:
                settle.result(i, d)
            elif d.role is Role.ASSISTANT:
                settle.assistant(i, d)
            elif settle.waiting:
                settle.deferred.append(i)
                settle.reordered += 1
            else:
                settle.out.append(i)
        still_open = [] if self.faults.lenient else [call.id for _, call, _ in settle.waiting]
        settle.close(final=True)
        return settle.out, still_open, settle.reordered, settle.renamed


class _Settle:
    """The walk of :meth:`SessionBuilder._settle`: where each draft goes, and what is open."""

    def __init__(self, faults: Faults, call_at: dict[int, At]) -> None:
        self.faults, self.call_at = faults, call_at
        self.out: list[int | ToolResult] = []
        self.waiting: list[tuple[str, ToolCall, At]] = []  # (id as written, call, where)
        self.deferred: list[int] = []
        self.used: set[str] = set()
        self.answered: set[str] = set()
        self.reordered = self.renamed = 0

    def close(self, *, final: bool) -> None:
        """The calls still waiting: damage before a later step (strict raises), closed with an
        error result when lenient; then what was deferred behind them."""
        lenient = self.faults.lenient
        for _, call, at in self.waiting:
            what = f"tool call {call.id!r} ({call.name})"
            if not lenient and not final:
                raise self.faults.fatal(
                    f"{what} has no result but the transcript goes on. Import with "
                    "--lenient to close it as interrupted",
                    at=at,
                    advice=None,
                )
            if lenient:
                self.faults.closed(f"closed {what}: no result was recorded", at=at)
                self.out.append(ToolResult(call.id, INTERRUPTED, is_error=True))
        if lenient:
            self.waiting.clear()
        self.out.extend(self.deferred)
        self.deferred.clear()

    def result(self, i: int, d: _Draft) -> None:
        result = d.parts[0]
        assert isinstance(result, ToolResult)
        match = next((w for w in self.waiting if w[0] == result.call_id), None)
        if match is not None:
            self.waiting.remove(match)
            if match[1].id != result.call_id:
                d.parts[0] = replace(result, call_id=match[1].id)
            self.answered.add(match[1].id)
            self.out.append(i)
            if not self.waiting:
                self.out.extend(self.deferred)
                self.deferred.clear()
            return
        cid = result.call_id
        reason = (
            f"a second result for tool call {cid!r}"
            if cid in self.answered
            else f"tool result for unknown call {cid!r}"
        )
        if not self.faults.lenient:
            raise self.faults.fatal(
                f"{reason}. Import with --lenient to keep it unpaired", at=d.at, advice=None
            )
        self.faults.repaired(f"kept unpaired: {reason}", at=d.at)
        (self.deferred if self.waiting else self.out).append(i)

    def assistant(self, i: int, d: _Draft) -> None:
        if self.waiting:
            self.close(final=False)
        self.out.append(i)
        for k, part in enumerate(d.parts):
            if not isinstance(part, ToolCall):
                continue
            at = self.call_at.get(id(part), d.at)
            call = part
            n = 1
            while call.id in self.used:
                n += 1
                call = replace(part, id=f"{part.id}__{n}")
            if call is not part:
                d.parts[k] = call
                self.renamed += 1
            self.used.add(call.id)
            self.waiting.append((part.id, call, at))
