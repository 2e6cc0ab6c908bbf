"""The task's state in the history (ENG-2): what every engine carries across its compactions.

Users of agents that compact lose the goal, the running sub-agents and what they answered when
the history is summarized. comal keeps, through every engine's compaction, one block derived
from the entries it compresses:

- the **goal**: the first request the user wrote (verbatim up to 1,500 characters, else its
  start and the exact ``EvidenceRead`` of the whole);
- the **board** (BRD-2): the newest board a board operation's result showed (:mod:`._board`);
- the **work steps** (WRK-1/2): each step's number, child session and objective from
  ``WorkStepRun``, then what ``WorkStepWait`` last said of it (finished, incomplete, not
  finished yet) with the exact ``EvidenceRead`` that reads its answer and the answer's sha256;
  a step started and never collected stays listed as started;
- the **drafts** (WRK-4): title, version, record, sha256 and size of each ``WorkDraft``.

The operator's instructions are the system prompt, which every engine pins before anything it
compacts. Like the board, the state is a pure function of stored entries: the work operations
end their results with what they did, in words the house writes (the formats of
:mod:`comal.work` and the agent's coordinator), and only results of those operations are read.
So a replay derives the same state, the same bytes, as the live turn did; and the block an
engine sends changes only when its compaction does, never between two (the cached prefix
holds). Everything in it that a tool or the model wrote is kept on its line or quoted
(:mod:`comal.safe_text`), so nothing in a goal or an objective can pass for a line comal wrote.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..evidence import evidence_call, message_text, utf16_len
from ..ledger import Entry
from ..messages import Role, ToolCall, sha256_hex, user_words
from ..safe_text import one_line, quote_lines
from ._board import board_in

__all__ = [
    "TASK_MARK",
    "TASK_TOOLS",
    "TaskState",
    "draft_lines",
    "step_lines",
    "task_note",
]

TASK_MARK = "[comal: the task's state"
TASK_TOOLS = frozenset({"WorkStepRun", "WorkStepWait", "WorkDraft"})
GOAL_CHARS = 1_500
_GOAL_HEAD = 300
_OBJECTIVE_CHARS = 120
_MAX_STEPS = 64
_MAX_DRAFTS = 16

_STARTED = re.compile(
    r"^work step #(?P<n>\d+) (?:started in child session (?P<child>\S+)|"
    r"\(child session (?P<child2>\S+)\) is (?P<outcome>\w+) already)"
)
_HEADLINE = re.compile(
    r"(?m)^step #(?P<n>\d+) \(child (?P<child>[^\s:]+): .*?\): (?P<status>finished in \d+ turns"
    r"|INCOMPLETE: .*|not finished yet \(.*\))$"
)
_ANSWER = re.compile(
    r"(?m)^answer \(sha256 (?P<sha>[0-9a-f]{64}); (?P<call>EvidenceRead\([^\n]*?\))\):$"
)
_DRAFT = re.compile(
    r'^\[draft "(?P<title>.*)" v(?P<version>\d+): record (?P<record>\d+), sha256 '
    r"(?P<sha>[0-9a-f]{64}), (?P<chars>[\d,]+) characters;"
)
# The lines comal writes in the block; text from the entries must not pass for one of them.
_FRAME = (TASK_MARK, "Goal (", "Board (", "Work steps (", "Drafts (", "- #", '- "')


@dataclass(slots=True)
class TaskState:
    """The goal, board, work steps and drafts as JSON-able values; :meth:`fold` adds entries.

    ``steps`` is keyed by the step's number as text (a JSON object's keys are text); rendering
    orders them by number, and ``drafts`` keep the order they were made in, so the state reads
    back from stored JSON to the same bytes."""

    goal: dict[str, Any] | None = None
    board: dict[str, Any] | None = None
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    drafts: list[dict[str, Any]] = field(default_factory=list)
    through: int = -1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TaskState:
        """The state stored in a stand-in's meta (a deep copy: the view stays untouched)."""
        if not isinstance(data, Mapping):
            return cls()
        names = set(cls.__dataclass_fields__)
        return cls(**{k: copy.deepcopy(v) for k, v in data.items() if k in names})

    @property
    def empty(self) -> bool:
        return not (self.goal or self.board or self.steps or self.drafts)

    def copy(self) -> TaskState:
        return TaskState.from_dict(self.to_dict())

    def fold(self, entries: Iterable[Entry]) -> TaskState:
        """Fold ``entries`` (whole steps, oldest first) into the state; returns it."""
        calls: dict[str, ToolCall] = {}
        for entry in entries:
            if entry.seq <= self.through:
                continue  # already folded (a stand-in built on another)
            self.through = entry.seq
            message = entry.message
            for call in message.tool_calls:
                calls[call.id] = call
            if message.role is Role.USER and self.goal is None:
                self.goal = _goal(entry)
            self.board = board_in(entry) or self.board
            result = message.tool_result
            if result is None or result.name not in TASK_TOOLS:
                continue
            if result.name == "WorkStepRun":
                started = started_step(entry, calls.get(result.call_id))
                if started is not None:
                    known = self.steps.get(str(started["n"]), {})
                    self.steps[str(started["n"])] = known | started
            elif result.name == "WorkStepWait":
                for said in waited_steps(entry):
                    known = self.steps.get(str(said["n"]), {"n": said["n"]})
                    self.steps[str(said["n"])] = known | said
            elif (draft := made_draft(entry)) is not None:
                self.drafts.append(draft)
                del self.drafts[:-_MAX_DRAFTS]
        while len(self.steps) > _MAX_STEPS:
            del self.steps[min(self.steps, key=int)]
        return self


def _goal(entry: Entry) -> dict[str, Any] | None:
    text, start = user_words(entry.message)
    if not text.strip():
        return None
    goal: dict[str, Any] = {"seq": entry.seq, "entry": entry.id}
    if len(text) <= GOAL_CHARS:
        return goal | {"text": text}
    whole = message_text(entry.message)
    return goal | {
        "text": text[:_GOAL_HEAD],
        "digest": sha256_hex(whole),
        "units": utf16_len(text),
        "offset": utf16_len(whole[:start]),
    }


def _objective(call: ToolCall | None) -> str:
    if call is None:
        return ""
    try:
        args = json.loads(call.arguments)
    except (ValueError, RecursionError):
        return ""
    value = args.get("objective") if isinstance(args, dict) else None
    if not isinstance(value, str):
        return ""
    shown = one_line(value)
    return shown if len(shown) <= _OBJECTIVE_CHARS else shown[: _OBJECTIVE_CHARS - 1] + "…"


def started_step(entry: Entry, call: ToolCall | None) -> dict[str, Any] | None:
    """What a ``WorkStepRun`` result says: ``{"n", "child", "status", "seq", "objective"}``."""
    result = entry.message.tool_result
    if result is None or result.is_error:
        return None
    found = _STARTED.match(result.text)
    if found is None:
        return None
    outcome = found["outcome"]
    return {
        "n": int(found["n"]),
        "child": found["child"] or found["child2"],
        "status": "started" if outcome is None else outcome,
        "seq": entry.seq,
        "objective": _objective(call),
    }


def waited_steps(entry: Entry) -> list[dict[str, Any]]:
    """What a ``WorkStepWait`` result says of each step: ``{"n", "child", "status", "seq"}``
    and, when it has one, ``"answer"`` (the exact ``EvidenceRead`` of the answer) and
    ``"sha256"``."""
    result = entry.message.tool_result
    if result is None or result.is_error:
        return []
    text = result.text
    heads = list(_HEADLINE.finditer(text))
    out: list[dict[str, Any]] = []
    for k, head in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        said: dict[str, Any] = {
            "n": int(head["n"]),
            "child": head["child"],
            "status": one_line(head["status"]),
            "seq": entry.seq,
        }
        answer = _ANSWER.search(text, head.end(), end)
        if answer is not None:
            said |= {"answer": answer["call"], "sha256": answer["sha"]}
        out.append(said)
    return out


def made_draft(entry: Entry) -> dict[str, Any] | None:
    """What a ``WorkDraft`` result says: ``{"title", "version", "record", "sha256", "chars",
    "seq"}``."""
    result = entry.message.tool_result
    if result is None or result.is_error:
        return None
    found = _DRAFT.match(result.text)
    if found is None:
        return None
    return {
        "title": one_line(found["title"]),
        "version": int(found["version"]),
        "record": int(found["record"]),
        "sha256": found["sha"],
        "chars": int(found["chars"].replace(",", "")),
        "seq": entry.seq,
    }


def step_lines(steps: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The work steps, by number, as the block and the limit engine's checkpoint show them."""
    if not steps:
        return []
    lines = ["Work steps (WorkStepWait(steps=[n]) collects one; EvidenceRead reads an answer):"]
    for key in sorted(steps, key=int):
        s = steps[key]
        what = f'"{s["objective"]}"' if s.get("objective") else "objective not shown"
        child = one_line(str(s.get("child", "?")))
        status = one_line(str(s.get("status", "?")))
        if status == "started":
            line = (
                f"- #{s['n']} child {child} ({what}): started at seq {s['seq']}, its result "
                f"not collected yet: WorkStepWait(steps=[{s['n']}])"
            )
        else:
            line = f"- #{s['n']} child {child} ({what}): {status} (as of seq {s['seq']})"
            if s.get("answer"):
                line += f"; its answer: {s['answer']}, sha256 {s['sha256']}"
        lines.append(line)
    return lines


def draft_lines(drafts: Iterable[Mapping[str, Any]]) -> list[str]:
    made = list(drafts)
    if not made:
        return []
    lines = ["Drafts (WorkDraft; each is rebuilt from its references):"]
    for d in made:
        lines.append(
            f'- "{d["title"]}" v{d["version"]}: record {d["record"]}, sha256 {d["sha256"]}, '
            f"{d['chars']:,} characters (seq {d['seq']})"
        )
    return lines


def goal_lines(goal: Mapping[str, Any] | None) -> list[str]:
    if not goal:
        return []
    head = f"Goal (the first request, seq {goal['seq']}, entry {goal['entry']}):"
    text = quote_lines(str(goal["text"]), _FRAME)
    if "digest" not in goal:
        return [head, text]
    call = evidence_call(goal["entry"], "text", goal["digest"], offset=goal.get("offset", 0))
    return [head, f"{text} … ({goal['units']:,} UTF-16 units; read it exactly: {call})"]


def task_note(state: TaskState, *, goal: bool = True) -> str | None:
    """The block an engine sends after what it compacted; None when there is nothing to keep.
    ``goal``: include the goal (an engine that keeps the first request verbatim need not)."""
    if state.empty:
        return None
    blocks = [
        f"{TASK_MARK} as of seq {state.through}, derived from the ledger and kept across the "
        "compaction; anything newer follows in the conversation]"
    ]
    if goal:
        blocks.append("\n".join(goal_lines(state.goal)))
    if state.board is not None:
        b = state.board
        head = f"Board (from {one_line(str(b['tool']))} at seq {b['seq']}; BoardList shows it now):"
        blocks.append(f"{head}\n{quote_lines(str(b['text']), _FRAME)}")
    blocks.append("\n".join(step_lines(state.steps)))
    blocks.append("\n".join(draft_lines(state.drafts)))
    return "\n\n".join(b for b in blocks if b)
