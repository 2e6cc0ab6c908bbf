"""Deriving a checkpoint deterministically, without a model (LIM-3).

The checkpoint stands for whole steps ``first_seq..last_seq``: the user's requests in order
(verbatim when short, an exact reference when long), the plan, the task's board as the newest
board operation showed it (BRD-2), files touched with their last
digests, commands with exit codes, the last errors, tool calls still open, and exact references
to the newest outputs it replaces. It is rendered to fit the engine's checkpoint reserve by
dropping the least useful items first, and the structured state goes into the checkpoint's meta
so the next checkpoint folds only new steps onto it.

The header is comal's word; what the steps held is not. A path, a tool name or an error's first
line is kept on its line (:func:`comal.safe_text.one_line`), and a request, a plan's text or an
earlier checkpoint's text is shown as a reader sees its lines with any that reads as the header
or a section heading quoted (:func:`comal.safe_text.quote_lines`): a CR, U+2028 or a zero-width
character cannot make a tool's output pass for a line comal wrote.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from ...evidence import evidence_call
from ...ledger import CheckpointRecord, Entry
from ...messages import PREAMBLE_CLOSE, Checkpoint, Message, Role, Text, is_preamble
from ...safe_text import one_line, quote_lines
from ...tokens import TokenCounter
from .._assembly import CheckpointProposal
from .._render import message_tokens
from .._task import draft_lines, step_lines
from ._config import EngineConfig
from ._state import ENGINE_NAME, ENGINE_VERSION
from ._workstate import WorkState

__all__ = ["derive_checkpoint", "previous_state", "previous_streak"]

# Trimmed first to last when the text is over its reserve; requests are the last to go.
_TRIM_ORDER = (
    "refs", "commands", "files", "plan", "errors", "open", "prior", "drafts", "steps", "board",
    "requests",
)  # fmt: skip
_PRIOR_CHARS = 2_000
_DIGEST_SHOWN = 16
_HEADER = "Deterministic checkpoint derived by comal"
# The lines comal writes; text from the steps must not pass for one of them.
_FRAME = (
    _HEADER,
    "User requests, in order",
    "Plan (from",
    "Board (from",
    "Files touched",
    "Commands run",
    "Last errors",
    "Tool calls without a recorded result",
    "Work steps (",
    "Drafts (",
    "Outputs it replaces",
    "Earlier checkpoint",
)


def _quoted(text: str) -> str:
    return quote_lines(text, _FRAME)


def _meta_ok(record: CheckpointRecord) -> bool:
    return record.meta.get("engine") == ENGINE_NAME and record.meta.get("version") == ENGINE_VERSION


def previous_state(record: CheckpointRecord | None) -> WorkState:
    """The state to fold new steps onto: this engine's stored state, or the old text as prior."""
    if record is None:
        return WorkState()
    state_data = record.meta.get("state")
    if _meta_ok(record) and isinstance(state_data, dict):
        # A deep copy: folding must never touch the view's record (views are immutable inputs).
        return WorkState.from_dict(copy.deepcopy(state_data))
    text = "\n".join(
        p.text if isinstance(p, (Checkpoint, Text)) else "" for p in record.message.parts
    ).strip()
    return WorkState(
        first_seq=record.first_seq, last_seq=record.last_seq, prior_text=text[:_PRIOR_CHARS]
    )


def previous_streak(record: CheckpointRecord | None) -> int:
    if record is None or not _meta_ok(record):
        return 0
    value = record.meta.get("low_saving_streak", 0)
    return value if isinstance(value, int) else 0


def _newest(items: Sequence[Any], keep: int) -> list[Any]:
    return list(items[len(items) - keep :]) if keep > 0 else []


def _words(text: str) -> str:
    """A request as a state stored before requests left the preamble out held it: the
    preamble's lines, then the words."""
    head, sep, rest = text.partition("\n" + PREAMBLE_CLOSE + "\n")
    return rest if sep and is_preamble(head + "\n" + PREAMBLE_CLOSE) else text


def _requests(state: WorkState, keep: int) -> list[str]:
    chosen = list(enumerate(state.requests))
    if len(chosen) > keep:
        chosen = ([chosen[0]] if keep >= 2 else []) + _newest(chosen[1:], max(keep - 1, 1))
    skipped = state.requests_total - len(chosen)
    lines = [f"User requests, in order ({state.requests_total} in all):"]
    for i, (_, r) in enumerate(chosen):
        if i == 1 and skipped:
            lines.append(f"   ({skipped} earlier requests are left out here)")
        head = f"{i + 1}. [seq {r['seq']}, entry {r['entry']}]"
        if "digest" not in r:
            lines.append(f"{head} {_quoted(_words(r['text']))}")
            continue
        call = evidence_call(r["entry"], "text", r["digest"], offset=r.get("offset", 0))
        lines.append(
            f"{head} ({r['units']:,} UTF-16 units, start shown) {_quoted(r['text'])} … "
            f"[read it exactly: {call}]"
        )
    return lines


def _files(state: WorkState, keep: int) -> list[str]:
    # By the seq of the last touch, not the mapping's order: a state read back from the ledger
    # has its keys sorted, and a replay's in-memory one has not; both must render alike.
    ordered = sorted(state.files.items(), key=lambda kv: (kv[1]["seq"], kv[0]))
    paths = _newest(ordered, keep)
    if not paths:
        return []
    verbs = {"read": "read", "write": "written", "edit": "edited"}
    lines = [f"Files touched (oldest first; {len(paths)} of {len(state.files)} shown):"]
    for path, f in paths:
        op = one_line(verbs.get(f["op"], f["op"]))
        what = f"- {one_line(path)}: {op} by {one_line(f['tool'])} at seq {f['seq']}"
        if f["digest"]:
            kind = "output" if f["op"] == "read" else "content"
            what += f", {kind} sha256 {f['digest'][:_DIGEST_SHOWN]}…"
        lines.append(what)
    return lines


def _sections(state: WorkState, keep: dict[str, int]) -> list[list[str]]:
    out: list[list[str]] = []
    if state.requests:
        out.append(_requests(state, keep["requests"]))
    if state.plan is not None and keep["plan"]:
        plan = state.plan
        lines = [f"Plan (from {one_line(plan['tool'])} at seq {plan['seq']}):"]
        items = plan["items"][: keep["plan"]]
        lines += [f"- [{one_line(s or 'item')}] {one_line(t)}" for s, t in items]
        if "text" in plan:
            lines.append(_quoted(plan["text"]))
        out.append(lines)
    if state.board is not None and keep["board"]:
        board = state.board
        head = (
            f"Board (from {one_line(board['tool'])} at seq {board['seq']}; BoardList shows it now):"
        )
        out.append([head, _quoted(board["text"])])
    if state.work_steps and keep["steps"]:
        # ENG-2: every step the covered history started, with its status and answer's read.
        newest = sorted(state.work_steps, key=int)[-keep["steps"] :]
        out.append(step_lines({k: state.work_steps[k] for k in newest}))
    if state.drafts and keep["drafts"]:
        out.append(draft_lines(state.drafts[-keep["drafts"] :]))
    out.append(_files(state, keep["files"]))
    commands = _newest(state.commands, keep["commands"])
    if commands:
        lines = [f"Commands run (last {len(commands)} of {state.commands_total}):"]
        for c in commands:
            status = f"exit {c['exit']}" if c["exit"] is not None else "exit code not shown"
            lines.append(
                f"- seq {c['seq']}: `{one_line(c['command'])}` → {status}"
                + (" (reported as an error)" if c["failed"] else "")
            )
        out.append(lines)
    errors = _newest(state.errors, keep["errors"])
    if errors:
        lines = [f"Last errors (last {len(errors)} of {state.errors_total}):"]
        for e in errors:
            call = evidence_call(e["entry"], "content", e["digest"])
            # A state stored before error excerpts kept one preview line.
            said = e["excerpt"] if "excerpt" in e else [e.get("preview", "")]
            lines.append(f"- seq {e['seq']}, {one_line(str(e['tool']))} [{call}]:")
            lines += [f"    {_quoted(one_line(str(line)))}" for line in said]
        out.append(lines)
    opened = _newest(state.open_calls, keep["open"])
    if opened:
        lines = ["Tool calls without a recorded result:"]
        lines += [
            f"- seq {c['seq']}: {one_line(c['tool'])} (call {one_line(c['id'])})" for c in opened
        ]
        out.append(lines)
    refs = _newest(state.refs, keep["refs"])
    if refs:
        lines = [f"Outputs it replaces (newest {len(refs)} of {state.refs_total}):"]
        for r in refs:
            call = evidence_call(r["entry"], "content", r["digest"])
            tool = one_line(str(r["tool"]))
            lines.append(
                f"- seq {r['seq']}, {tool}, {r['units']:,} units, {r['lines']:,} lines: {call}"
            )
        out.append(lines)
    if state.prior_text and keep["prior"]:
        out.append(["Earlier checkpoint (not derived by this engine):", _quoted(state.prior_text)])
    return out


def _render(state: WorkState, keep: dict[str, int]) -> str:
    header = (
        f"{_HEADER} from the ledger (no model wrote it), "
        f"standing for entries seq {state.first_seq}..{state.last_seq}: {state.steps} steps, "
        f"{state.results} tool results. Nothing was deleted: every entry stays in the ledger, "
        'and EvidenceRead(entry=<id>, field="content") reads any tool output exactly.'
    )
    return "\n\n".join([header, *("\n".join(s) for s in _sections(state, keep) if s)])


def _fit(state: WorkState, counter: TokenCounter, max_tokens: int) -> tuple[Message, int]:
    keep = {
        "requests": len(state.requests),
        "plan": len(state.plan["items"]) if state.plan else 0,
        "files": len(state.files),
        "commands": len(state.commands),
        "errors": len(state.errors),
        "open": len(state.open_calls),
        "refs": len(state.refs),
        "prior": 1,
        "board": 1,
        "steps": len(state.work_steps),
        "drafts": len(state.drafts),
    }
    first, last = state.first_seq or 0, state.last_seq or 0

    def build(text: str) -> tuple[Message, int]:
        message = Message(Role.USER, (Checkpoint(text, first, last),))
        return message, message_tokens(counter, message)

    message, tokens = build(_render(state, keep))
    for section in _TRIM_ORDER:
        floor = _floor(state, section)
        while tokens > max_tokens and keep[section] > floor:
            keep[section] = max(floor, keep[section] // 2)
            message, tokens = build(_render(state, keep))
    # What is left is the task itself (ENG-2): the first and newest requests (each bounded),
    # the board, the work steps and the drafts. It is never cut to fit the reserve: a
    # checkpoint over its reserve is priced as it is, and the tail makes room for it.
    return message, tokens


def _floor(state: WorkState, section: str) -> int:
    """How much of a section trimming keeps: the first request (the goal) and the newest one,
    the board, every work step and draft; nothing of the rest."""
    if section == "requests":
        return min(2, len(state.requests))
    if section == "steps":
        return len(state.work_steps)
    if section == "drafts":
        return len(state.drafts)
    return 1 if section == "board" else 0


def derive_checkpoint(
    previous: CheckpointRecord | None,
    groups: Sequence[Sequence[Entry]],
    config: EngineConfig,
    counter: TokenCounter,
    max_tokens: int,
    meta: dict[str, Any],
) -> CheckpointProposal:
    """Fold ``groups`` (whole steps, oldest first) onto the previous checkpoint's state."""
    state = previous_state(previous)
    for group in groups:
        state.fold(list(group), config)
    state.generation += 1
    message, tokens = _fit(state, counter, max_tokens)
    full = {"engine": ENGINE_NAME, "version": ENGINE_VERSION, **meta, "state": state.to_dict()}
    return CheckpointProposal(message, state.first_seq or 0, state.last_seq or 0, tokens, full)
