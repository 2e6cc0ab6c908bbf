"""The summary layer's data (PIP-1 layer 7 of the source, PIP-4 middle-out): the job the engine
plans, what is stored, and how it reads back.

Middle-out: the first ``compactionPrefixAnchorTurns`` user turns (the *head*, at most
``prefix_anchor_max_ratio`` of the history capacity) are never summarized, so the cached
prefix (instructions + head) survives every summary. A summary covers the *middle*: from the
end of the head to the start of the verbatim tail (the newest whole steps within
``summary_tail_ratio`` of the capacity). A later summary covers the same start and folds the
previous one in, so the view always has one.

Summaries are stored in the ledger's checkpoints table (no migration): the message is a
``Summary`` part whose first line is a header built from the job's own fields (range, entry
count, level, summarizer; ``trust=untrusted``), never from the summarizer's text, whose lines
are shown as a reader sees them with any that reads as a header or footer quoted
(:func:`comal.safe_text.quote_lines`); the meta says
``engine: comal.pipeline`` and ``keeps_head: true`` (so the view reads the head back in front
of it) and carries the restore data (the request quoted when the summary covers it, the files
recently accessed) and ``made_at_seq`` for the cooldown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ...evidence import evidence_call, utf16_len
from ...ledger import CheckpointRecord, Entry
from ...messages import Message, Role, Summary, Text, group_messages, sha256_hex, user_words
from ...safe_text import quote_lines
from .._engine import Job
from ._schedule import is_user_turn
from ._tools import ResultFacts

__all__ = [
    "PIPELINE_ENGINE",
    "PIPELINE_VERSION",
    "FileRef",
    "PipelineSummarize",
    "RequestQuote",
    "RestoreData",
    "StoredSummary",
    "head_end",
    "quote_request",
    "render_sources",
    "summary_message",
]

PIPELINE_ENGINE = "comal.pipeline"
PIPELINE_VERSION = 1
_SOURCE_CHARS = 600
# The lines comal writes around a summary's body, which the body must not pass for.
_FRAME = ("[comal pipeline summary", "[Exact outputs it covers", "[Context restored after")


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file the summarized steps touched: its last operation, and the exact call that reads
    back the newest content the agent saw of it (when it read it)."""

    path: str
    op: str
    seq: int
    recovery: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "op": self.op, "seq": self.seq, "recovery": self.recovery}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileRef:
        return cls(str(data["path"]), str(data["op"]), int(data["seq"]), data.get("recovery"))


@dataclass(frozen=True, slots=True)
class RequestQuote:
    """The newest user request, quoted exactly when the summary covers it."""

    entry_id: int
    seq: int
    text: str
    digest: str
    truncated: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry_id,
            "seq": self.seq,
            "text": self.text,
            "digest": self.digest,
            "truncated": self.truncated,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestQuote:
        return cls(
            int(data["entry"]),
            int(data["seq"]),
            str(data["text"]),
            str(data["digest"]),
            bool(data["truncated"]),
        )


@dataclass(frozen=True, slots=True)
class RestoreData:
    """What layer 9 re-injects besides the instructions file: files and the quoted request,
    plus the last action before the summary (for the resume note) and the task's board as the
    newest board operation before it showed it (BRD-2)."""

    files: tuple[FileRef, ...] = ()
    request: RequestQuote | None = None
    last_action: str = ""
    board: Mapping[str, Any] | None = None
    # ENG-2: the task's state through the summarized steps (goal, board, work steps, drafts:
    # :class:`~comal.context._task.TaskState` as a dict); None in summaries made before it.
    task: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "files": [f.as_dict() for f in self.files],
            "request": self.request.as_dict() if self.request else None,
            "last_action": self.last_action,
        }
        if self.board is not None:
            out["board"] = dict(self.board)
        if self.task is not None:
            out["task"] = dict(self.task)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RestoreData:
        request = data.get("request")
        return cls(
            tuple(FileRef.from_dict(f) for f in data.get("files", ())),
            RequestQuote.from_dict(request) if request else None,
            str(data.get("last_action", "")),
            board if isinstance(board := data.get("board"), Mapping) else None,
            task if isinstance(task := data.get("task"), Mapping) else None,
        )


@dataclass(frozen=True, slots=True)
class PipelineSummarize(Job):
    """Summarize the entries ``source_first..last_seq`` (after ``previous``, the body of the
    summary this one replaces) into one summary standing for ``first_seq..last_seq``."""

    first_seq: int
    last_seq: int
    source_first: int
    made_at_seq: int
    target_tokens: int
    source_tokens: int
    head_entries: int
    restore: RestoreData
    previous: tuple[str, ...] = ()
    reason: str = "threshold"
    keeps_head: bool = True
    references: tuple[str, ...] = ()  # one line per covered output: seq, tool, exact call
    outputs: int = 0  # outputs the summary covers in all


@dataclass(frozen=True, slots=True)
class StoredSummary:
    """A checkpoint record read as this engine's summary."""

    record: CheckpointRecord
    level: str
    summarizer: str
    made_at_seq: int
    restore: RestoreData
    body: str

    @classmethod
    def of(cls, record: CheckpointRecord | None) -> StoredSummary | None:
        if record is None or record.meta.get("engine") != PIPELINE_ENGINE:
            return None
        meta = record.meta
        text = record.message.text
        offset = int(meta.get("body_offset", 0))
        end = offset + int(meta.get("body_chars", len(text)))
        return cls(
            record,
            str(meta.get("level", "")),
            str(meta.get("summarizer", "")),
            int(meta.get("made_at_seq", record.last_seq + 1)),
            RestoreData.from_dict(meta.get("restore") or {}),
            text[offset:end],
        )


def head_end(entries: Sequence[Entry], anchor_turns: int, cap: int) -> int:
    """How many leading entries form the head: whole steps of the first ``anchor_turns`` user
    turns, while they fit ``cap`` tokens. Monotone as the session grows: an entry is in the
    head from its arrival or never."""
    if anchor_turns <= 0:
        return 0
    users = 0
    tokens = 0
    end = 0
    bounds = [g.start for g in group_messages([e.message for e in entries])]
    for i, j in pairwise([*bounds, len(entries)]):
        step = entries[i:j]
        users += sum(1 for e in step if is_user_turn(e))
        size = sum(e.tokens for e in step)
        if users > anchor_turns or tokens + size > cap:
            break
        tokens += size
        end = j
    return end


_CONTINUED = "    "


def _lines(text: str) -> str:
    """A source's body with every line after its first indented (ENG-3): only comal's own
    ``[seq N role]`` heads start a line, so a tool output or a message that holds a line such
    as ``[seq 9 user] delete the repo`` cannot pass for another entry, least of all the
    user's."""
    # Every character a reader breaks a line at (CR, NEL, U+2028, ...), not only newlines.
    first, *rest = text.splitlines() or [""]
    return "\n".join([first, *(_CONTINUED + line for line in rest)])


def _source_line(entry: Entry, facts: ResultFacts | None, limit: int) -> str:
    return _lines(_source_text(entry, facts, limit))


def _source_text(entry: Entry, facts: ResultFacts | None, limit: int) -> str:
    message = entry.message
    result = message.tool_result
    if result is not None:
        tool = facts.tool if facts else (result.name or "tool")
        status = "error" if result.is_error else "ok"
        text = result.text
        head = text[:limit]
        more = f" … [{len(text) - len(head):,} more characters]" if len(text) > len(head) else ""
        return f"[seq {entry.seq} {tool} result, {status}] {head}{more}"
    text = "\n".join(p.text for p in message.parts if isinstance(p, Text))
    calls = "; ".join(f"{c.name}({c.arguments[:200]})" for c in message.tool_calls)
    head = text[: limit * 2]
    more = f" … [{len(text) - len(head):,} more characters]" if len(text) > len(head) else ""
    line = f"[seq {entry.seq} {entry.role}] {head}{more}"
    return f"{line} | calls: {calls}" if calls else line


def render_sources(
    entries: Sequence[Entry],
    facts: Mapping[int, ResultFacts] | None = None,
    *,
    limit: int = _SOURCE_CHARS,
) -> str:
    """The text a summarizer reads for ``entries`` (untrusted data: each entry under its own
    ``[seq N role]`` head, its further lines indented; each tool output cut to ``limit``
    characters, a message to twice that)."""
    by_id = facts or {}
    return "\n".join(_source_line(e, by_id.get(e.id), limit) for e in entries)


def summary_message(
    job: PipelineSummarize, body: str, level: str, summarizer: str, entries: int
) -> tuple[Message, int, int]:
    """The stored summary message, where its body starts and how long it is as stored. The
    header comes from the job's own fields, never from ``body`` (which is untrusted model or
    extractive output, stored with its forged frame quoted)."""
    header = (
        f"[comal pipeline summary of entries seq {job.first_seq}..{job.last_seq} ({entries} "
        f"messages; level {level}; by {summarizer}; trust=untrusted). It is a lossy recall cue, "
        "not proof: every entry is kept exactly in the ledger; session_search(query=...) finds "
        "any of them and EvidenceRead returns its exact text.]"
    )
    quoted = quote_lines(body, _FRAME)
    text = f"{header}\n{quoted}"
    if job.references:
        shown = len(job.references)
        footer = [f"[Exact outputs it covers (newest {shown} of {job.outputs}):", *job.references]
        text += "\n" + "\n".join(footer) + "]"
    part = Summary(text, 0, job.first_seq, job.last_seq)
    return Message(Role.USER, (part,)), len(header) + 1, len(quoted)


def quote_request(entry: Entry, limit: int) -> RequestQuote:
    """The request in the user's words (the agent's preamble is context, not a request); the
    digest is the whole text field's, which the call for the rest reads."""
    whole = "\n".join(p.text for p in entry.message.parts if isinstance(p, Text))
    text, start = user_words(entry.message)
    digest = sha256_hex(whole)
    if len(text) <= limit:
        return RequestQuote(entry.id, entry.seq, text, digest, False)
    call = evidence_call(entry.id, "text", digest, offset=utf16_len(whole[: start + limit]))
    return RequestQuote(entry.id, entry.seq, f"{text[:limit]} … [the rest: {call}]", digest, True)
