"""Claude Code: the session JSONL, and the ``{"loglines": [...]}`` web export.

Entries link into a tree through ``uuid``/``parentUuid``. The main conversation is the branch
that ends at the last main-chain entry, followed back to its root; a root that is not the start
of the file (a compaction boundary, a resume, or hand-written fixtures with no links) continues
with the branch ending just before it. Entries on abandoned branches (rewinds) are left out.
Sub-agent entries (``isSidechain``) become child sessions, one per sidechain root.

One API response is often written as several lines sharing ``message.id``: they are merged into
one assistant message, and the usage of the last line (the final output count) is kept.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comal.messages import Message, Part, Role, Text, ToolCall, ToolResult

from ._base import Faults, ImportedSession, RecordError, SessionBuilder
from ._fields import as_dict, opt
from ._jsonio import iter_jsonl, read_json, records
from ._plain import add_anthropic, anthropic_parts

# Entry types that are bookkeeping, never part of the model's context.
SKIPPED_TYPES = {"summary", "file-history-snapshot", "system", "progress", "queue-operation"}


@dataclass
class _Entry:
    at: Any  # line number (JSONL) or JSON path (web export)
    kind: str  # "user" | "assistant" | a skipped type
    uuid: str | None
    parent: str | None
    sidechain: bool
    role: Role | None = None
    parts: list[Part] | None = None
    msg_id: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    raw: dict[str, Any] | None = None
    stamp: str | None = None  # the record's own time, kept after raw is dropped


def _entry(rec: Any, at: Any) -> _Entry:
    """Validate one record completely before anything is built from it."""
    d = as_dict(rec, "")
    kind = opt(d, "type", str)
    message = d.get("message")
    if kind is None and isinstance(message, dict):
        kind = opt(message, "role", str, "message")  # usage-only exports omit the entry type
    if kind is None:
        raise RecordError("entry has no 'type'", "type")
    e = _Entry(
        at, kind, opt(d, "uuid", str), opt(d, "parentUuid", str), bool(d.get("isSidechain")), raw=d
    )
    stamp = d.get("timestamp")
    e.stamp = stamp if isinstance(stamp, str) else None
    if kind not in ("user", "assistant"):
        return e
    msg = as_dict(message, "message")
    e.role = Role.USER if kind == "user" else Role.ASSISTANT
    if "content" in msg and msg["content"] is not None:
        e.parts = anthropic_parts(msg["content"], "message.content")
    else:
        e.parts = []  # usage-only record: the content was not logged
    wrong = ToolResult if e.role is Role.ASSISTANT else ToolCall
    if any(isinstance(p, wrong) for p in e.parts):
        block = "tool_result" if wrong is ToolResult else "tool_use"
        raise RecordError(f"a {kind} message holds a {block} block", "message.content")
    if e.role is Role.ASSISTANT:
        e.msg_id = opt(msg, "id", str, "message")
        e.usage = opt(msg, "usage", dict, "message")
        e.model = opt(msg, "model", str, "message")
    return e


def _main_chain(entries: list[_Entry]) -> list[_Entry]:
    """The main conversation: the live branch of each segment, segments in file order."""
    index = {e.uuid: i for i, e in enumerate(entries) if e.uuid}
    talk = [i for i, e in enumerate(entries) if e.role is not None and not e.sidechain]
    chosen: set[int] = set()
    visited: set[int] = set()
    pos = len(talk) - 1
    while pos >= 0:
        i: int | None = talk[pos]
        root = talk[pos]
        while i is not None and i not in visited:
            visited.add(i)
            root = i
            if entries[i].role is not None and not entries[i].sidechain:
                chosen.add(i)
            parent = entries[i].parent
            i = index.get(parent) if parent else None
        # Continue with the newest main entry older than this segment's root.
        while pos >= 0 and (talk[pos] >= root or talk[pos] in visited):
            pos -= 1
    return [entries[i] for i in sorted(chosen)]


def _sidechains(entries: list[_Entry]) -> list[tuple[str, list[_Entry]]]:
    """Sub-agent conversations, grouped by the root each entry descends from."""
    root_of: dict[str, str] = {}
    chains: dict[str, list[_Entry]] = {}
    for n, e in enumerate(entries):
        if not e.sidechain or e.role is None:
            continue
        root = root_of.get(e.parent) if e.parent else None
        if root is None:
            root = e.uuid or f"entry-{n}"
            chains[root] = []
        if e.uuid:
            root_of[e.uuid] = root
        chains[root].append(e)
    return list(chains.items())


def _build(faults: Faults, chain: list[_Entry]) -> tuple[SessionBuilder, Counter[str]]:
    b = SessionBuilder(faults)
    by_msg_id: dict[str, int] = {}
    models: Counter[str] = Counter()
    for e in chain:
        assert e.role is not None and e.parts is not None
        b.when = e.stamp
        try:
            if e.role is Role.ASSISTANT and e.msg_id in by_msg_id:
                index = by_msg_id[e.msg_id]
                b.extend(index, e.parts, at=e.at)
            else:
                added = add_anthropic(b, e.role, e.parts, e.at)
                if added is None:
                    continue
                index = added
                if e.msg_id:
                    by_msg_id[e.msg_id] = index
                if e.model:
                    models[e.model] += 1
        except RecordError as exc:
            faults.bad(exc.reason, at=e.at, field=exc.field)
            continue
        if e.usage is not None:
            b.usage(index, "anthropic", e.usage, e.model)
    return b, models


def load(path: Path, faults: Faults) -> list[ImportedSession]:
    return _sessions(path, faults, iter_jsonl(path, faults), "claude-code", path.stem)


def load_web(path: Path, faults: Faults) -> list[ImportedSession]:
    out: list[ImportedSession] = []
    for n, doc in enumerate(read_json(path, faults)):
        lines = doc.value.get("loglines") if isinstance(doc.value, dict) else None
        if not isinstance(lines, list):
            raise faults.fatal("expected an object with a 'loglines' list", field="loglines")
        source = ((("loglines", i), rec) for i, rec in records(doc, lines, ("loglines",), faults))
        key = path.stem if n == 0 else f"{path.stem}#{n}"
        out += _sessions(path, faults, source, "claude-code-web", key)
    return out


def _sessions(
    path: Path, faults: Faults, source: Iterable[tuple[Any, Any]], fmt: str, fallback_key: str
) -> list[ImportedSession]:
    entries: list[_Entry] = []
    skipped: Counter[str] = Counter()
    titles: list[tuple[str | None, str]] = []
    first: dict[str, Any] = {}
    for at, rec in source:
        try:
            e = _entry(rec, at)
        except RecordError as exc:
            faults.bad(exc.reason, at=at, field=exc.field)
            continue
        if e.role is None:
            skipped[e.kind] += 1
            if e.kind == "summary" and e.raw is not None and isinstance(e.raw.get("summary"), str):
                titles.append((opt(e.raw, "leafUuid", str), e.raw["summary"]))
        elif not first and e.raw is not None:
            first = e.raw
        e.raw = None  # keep only the parsed entry: a 100 MB session must not be held twice
        entries.append(e)
    session = first.get("sessionId") if isinstance(first.get("sessionId"), str) else None
    key = session or fallback_key
    main = _main_chain(entries)
    b, models = _build(faults, main)
    chain_ids = {e.uuid for e in main if e.uuid}
    title = next((t for leaf, t in reversed(titles) if leaf in chain_ids), None)
    if title is None and titles:
        title = titles[-1][1]
    meta: dict[str, Any] = {
        k: first[k] for k in ("sessionId", "cwd", "version", "gitBranch") if k in first
    }
    if isinstance(first.get("timestamp"), str):
        meta["started_at"] = first["timestamp"]  # the session starts when its transcript did
    meta["models"] = dict(models)
    meta["skipped_entries"] = dict(skipped)
    side = _sidechains(entries)
    if side:
        meta["sidechains"] = len(side)
    out: list[ImportedSession] = []
    if len(b) or not side:
        out.append(b.finish(source=str(path), format=fmt, key=key, title=title, meta=meta))
    task_calls = _task_calls(out[0].messages) if out else {}
    for root, chain in side:
        cb, cmodels = _build(faults, chain)
        child_meta: dict[str, Any] = {"sidechain_root": root, "models": dict(cmodels)}
        # A sub-agent started when its own first record was written, not when it was imported.
        started = next((e.stamp for e in chain if e.stamp), meta.get("started_at"))
        if started is not None:
            child_meta["started_at"] = started
        title = None
        first_user = chain[0].parts if chain and chain[0].role is Role.USER else None
        if first_user and isinstance(first_user[0], Text) and first_user[0].text in task_calls:
            call_id, description = task_calls[first_user[0].text]
            child_meta["parent_call_id"] = call_id
            title = f"sub-agent: {description}" if description else None
        out.append(
            cb.finish(
                source=str(path),
                format=fmt,
                key=f"{key}/sidechain/{root}",
                title=title,
                meta=child_meta,
                parent_key=key,
            )
        )
    return out


def _task_calls(messages: tuple[Message, ...]) -> dict[str, tuple[str, str | None]]:
    """``Task`` calls by prompt: the call's id and description, to link each sub-agent session
    to the call that started it and name it as the call did."""
    out: dict[str, tuple[str, str | None]] = {}
    for m in messages:
        for part in m.parts:
            if isinstance(part, ToolCall) and part.name == "Task":
                args = json.loads(part.arguments)
                if not isinstance(args, dict):
                    continue
                prompt, description = args.get("prompt"), args.get("description")
                if isinstance(prompt, str):
                    text = description.strip() if isinstance(description, str) else ""
                    out[prompt] = (part.id, text.splitlines()[0][:120] if text else None)
    return out
