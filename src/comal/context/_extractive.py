"""A summarizer without a model, and the count-only note every escalation ends in (DAG-3).

:class:`ExtractiveSummarizer` is deterministic: the same sources give the same text. It reads
the rendered sources (``### seq N · role …`` blocks, see :mod:`comal.context.dag._sources`, or
child summaries for a condensed node) and keeps, in this order of priority, the user's
requests, commands with their exit codes, error lines, decisions the assistant stated, other
tool calls, then the paths, identifiers and numbers it saw, until the target is reached. At
the ``aggressive`` level it aims at half the target with shorter lines. It is the default
summarizer when none is configured, so the dag engine works offline out of the box.

:func:`count_only_note` is the floor: a bounded note of what was condensed (how many messages
of which roles, which tools, how many errors) that always fits and is always smaller than its
source.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from ..tokens import EstimatingCounter, TokenCounter
from ._summarizer import SummaryRequest, SummaryText

__all__ = ["ExtractiveSummarizer", "command_of", "count_only_note", "exact_values", "exit_code"]

_BLOCK = re.compile(
    r"^### (seq (\d+) · (\w+)(.*)|summary (\d+) · depth (\d+) · seq (\d+)\.\.(\d+).*)$"
)
_CALL = re.compile(r"^→ call ([\w.:-]+) \(([^)]*)\): (.*)$")
_EXIT = re.compile(
    r"(?i)(?:exit(?:ed)?(?: with)?[ _](?:code|status)|returncode|exit_code)\W{0,3}(-?\d+)"
)
_ERROR = re.compile(
    r"(?:\b[A-Z]\w*(?:Error|Exception)\b|Traceback|\bFAIL(?:ED)?\b|\bfatal\b|\berror:|\bfailed\b)"
)
_DECISION = re.compile(
    r"(?i)\b(?:i(?:'ll| will)|let's|let me|decid\w*|plan\w*|instead|chose|going to|next,? i|"
    r"the (?:fix|cause|problem|issue) (?:is|was)|because|so i)\b"
)
PATH = re.compile(
    r"(?<![\w/.-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|js|ts|tsx|md|json|toml|yaml|"
    r"yml|txt|rs|go|c|h|cpp|java|rb|sh|cfg|ini|lock|html|css|sql)\b"
)
IDENT = re.compile(
    r"\b(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+[A-Z]\w*|"
    r"[0-9a-f]{7,40})\b"
)
NUMBER = re.compile(r"(?<![\w.])\d{2,}(?:[.,]\d+)*(?:%|ms|s|MB|KB|GB|k)?(?![\w.])")
_COMMAND_KEYS = ("command", "cmd", "script")
_SECTION = re.compile(r"^(Requests|Commands|Errors|Decisions|Calls|Notes):$")
_LIST = re.compile(r"^(Files|Identifiers|Numbers): (.*)$")
_ORDER = ("Requests", "Commands", "Errors", "Decisions", "Calls", "Notes")
_LISTS = ("Files", "Identifiers", "Numbers")


def _flat(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(slots=True)
class _Block:
    seq: int
    role: str
    head: str
    lines: list[str] = field(default_factory=list)
    summary: bool = False


def _blocks(sources: str) -> list[_Block]:
    out: list[_Block] = []
    for line in sources.split("\n"):
        m = _BLOCK.match(line)
        if m:
            if m.group(2) is not None:
                out.append(_Block(int(m.group(2)), m.group(3), m.group(4) or ""))
            else:
                out.append(_Block(int(m.group(7)), "summary", line, summary=True))
            continue
        if out:
            out[-1].lines.append(line[1:] if line.startswith("\\### ") else line)
    return out


def exact_values(text: str) -> set[str]:
    """The paths, identifiers and numbers in ``text`` (what the survival rate counts)."""
    return set(PATH.findall(text)) | set(IDENT.findall(text)) | set(NUMBER.findall(text))


def exit_code(output: str) -> str | None:
    """The exit code a command's output reports, read from its end first (where a shell
    tool states it), then from its start."""
    for window in (output[-2_000:], output[:300]):
        found = _EXIT.findall(window)
        if found:
            return str(found[-1])
    return None


def command_of(arguments: str) -> str | None:
    """The command a tool call runs, when its JSON arguments name one (``command``, ``cmd``,
    ``script``)."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict):
        for key in _COMMAND_KEYS:
            found = value.get(key)
            if isinstance(found, str) and found:
                return found
            if isinstance(found, list) and all(isinstance(x, str) for x in found):
                return " ".join(found)
    return None


@dataclass(slots=True)
class _Notes:
    sections: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in _ORDER})
    lists: dict[str, dict[str, None]] = field(default_factory=lambda: {k: {} for k in _LISTS})

    def values(self, text: str) -> None:
        for name, pattern in (("Files", PATH), ("Identifiers", IDENT), ("Numbers", NUMBER)):
            for v in pattern.findall(text):
                self.lists[name].setdefault(v, None)


def _collect_entries(blocks: list[_Block], width: int) -> _Notes:
    notes = _Notes()
    pending: dict[str, tuple[int, str]] = {}  # call id -> (index in Commands, command)
    for b in blocks:
        body = "\n".join(ln for ln in b.lines if not ln.startswith("→ call "))
        if b.role == "user" and body.strip():
            notes.sections["Requests"].append(f"- [seq {b.seq}] {_flat(body, width * 2)}")
        if b.role == "assistant":
            for sentence in re.split(r"(?<=[.!?])\s+|\n", body):
                if _DECISION.search(sentence) and len(sentence.strip()) > 12:
                    notes.sections["Decisions"].append(f"- [seq {b.seq}] {_flat(sentence, width)}")
        for line in b.lines:
            m = _CALL.match(line)
            if not m:
                continue
            name, cid, args = m.groups()
            cmd = command_of(args)
            if cmd is not None:
                notes.sections["Commands"].append(f"- [seq {b.seq}] `{_flat(cmd, width)}`")
                pending[cid] = (len(notes.sections["Commands"]) - 1, cmd)
            else:
                notes.sections["Calls"].append(f"- [seq {b.seq}] {name} {_flat(args, width // 2)}")
        if b.role == "tool":
            cid_match = re.search(r"\(([^)]*)\)", b.head)
            cid = cid_match.group(1) if cid_match else ""
            code = exit_code(body)
            if cid in pending:
                index, cmd = pending.pop(cid)
                status = f"exit {code}" if code is not None else "exit not shown"
                if "· error" in b.head:
                    status += ", reported as an error"
                notes.sections["Commands"][index] += f" → {status}"
            errors = [ln for ln in body.split("\n") if _ERROR.search(ln)]
            if "· error" in b.head and not errors and body.strip():
                errors = [body.strip().split("\n")[0]]
            for ln in errors[:3]:
                notes.sections["Errors"].append(f"- [seq {b.seq}] {_flat(ln, width)}")
        notes.values(body)
        for line in b.lines:
            m = _CALL.match(line)
            if m:
                notes.values(m.group(3))
    return notes


def _collect_summaries(blocks: list[_Block]) -> _Notes:
    notes = _Notes()
    for b in blocks:
        section = "Notes"
        for line in b.lines:
            m = _SECTION.match(line)
            if m:
                section = m.group(1)
                continue
            lm = _LIST.match(line)
            if lm:
                for v in lm.group(2).split(", "):
                    if v:
                        notes.lists[lm.group(1)].setdefault(v, None)
                continue
            if line.strip():
                notes.sections[section].append(line if line.startswith("- ") else f"- {line}")
    return notes


def _render(notes: _Notes, keep: dict[str, int], lists: dict[str, int]) -> str:
    out: list[str] = []
    for name in _ORDER:
        items = notes.sections[name]
        n = keep[name]
        if not n or not items:
            continue
        head, tail = items[: (n + 1) // 2], items[len(items) - n // 2 :]
        shown = items if n >= len(items) else [*head, *tail]
        more = len(items) - len(shown)
        out.append(f"{name}:" + (f" ({more} more left out)" if more and n else ""))
        out += shown
    for name in _LISTS:
        values = list(notes.lists[name])[: lists[name]]
        if values:
            out.append(f"{name}: {', '.join(values)}")
    return "\n".join(out)


class ExtractiveSummarizer:
    """The deterministic summarizer (no model); see the module docstring."""

    name = "extractive"

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter if counter is not None else EstimatingCounter()

    def summarize(self, request: SummaryRequest) -> SummaryText:
        if request.level == "count-only":
            return SummaryText(count_only_note(request, self.counter), "count-only")
        aggressive = request.level == "aggressive"
        target = max(32, request.target_tokens // 2 if aggressive else request.target_tokens)
        width = 120 if aggressive else 240
        blocks = _blocks(request.sources)
        summary = any(b.summary for b in blocks)
        notes = _collect_summaries(blocks) if summary else _collect_entries(blocks, width)
        keep = {k: len(v) for k, v in notes.sections.items()}
        lists = {k: len(v) for k, v in notes.lists.items()}
        text = _render(notes, keep, lists)
        # Trim the least useful first, halving each kind until the text fits the target.
        order = (
            *("Numbers", "Identifiers", "Calls", "Notes", "Files"),
            *("Decisions", "Errors", "Commands", "Requests"),
        )
        for name in order:
            while self.counter.count(text) > target:
                pool = lists if name in lists else keep
                floor = 1 if name == "Requests" else 0
                if pool[name] <= floor:
                    break
                pool[name] = max(floor, pool[name] // 2)
                text = _render(notes, keep, lists)
        while self.counter.count(text) > target and len(text) > 80:
            text = text[: int(len(text) * 0.8)].rstrip() + " …"
        if not text.strip():
            text = count_only_note(request, self.counter)
            return SummaryText(text, "count-only")
        return SummaryText(text, self.name)


def count_only_note(request: SummaryRequest, counter: TokenCounter) -> str:
    """The deterministic floor (DAG-3): what was condensed, counted; always smaller than the
    source when the source is larger than a short sentence."""
    blocks = _blocks(request.sources)
    if any(b.summary for b in blocks):
        count = sum(1 for b in blocks if b.summary)
        first = min((b.seq for b in blocks), default=0)
        text = (
            f"[count-only note by comal: {count} summaries from seq {first} on are condensed "
            "here without a summary; their text and sources are kept in the ledger]"
        )
    else:
        roles = Counter(b.role for b in blocks)
        tools: Counter[str] = Counter()
        errors = sum(1 for b in blocks if "· error" in b.head)
        for b in blocks:
            for line in b.lines:
                m = _CALL.match(line)
                if m:
                    tools[m.group(1)] += 1
        seqs = [b.seq for b in blocks]
        span = f"seq {min(seqs)}..{max(seqs)}" if seqs else "no messages"
        ranked = sorted(tools.items(), key=lambda x: (-x[1], x[0]))[:5]
        used = ", ".join(f"{t}×{n}" for t, n in ranked)
        text = (
            f"[count-only note by comal: {len(blocks)} messages ({span}: "
            f"{roles.get('user', 0)} from the user, {roles.get('assistant', 0)} from the "
            f"assistant, {roles.get('tool', 0)} tool results, {errors} errors"
            + (f"; tools {used}" if used else "")
            + ") are condensed here without a summary; their text is kept in the ledger]"
        )
    if counter.count(text) >= request.source_tokens:
        text = f"[{len(blocks)} items condensed]"
    return text
