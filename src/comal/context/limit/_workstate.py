"""The work state a checkpoint carries (LIM-3), derived from stored entries without a model.

:class:`WorkState` is folded step by step: a later checkpoint starts from the state stored in
the previous checkpoint's meta and folds only the new steps, so deriving costs time in
proportion to the new work. Each list keeps a bounded number of newest items (and a count of
all), so the state stays small however long the session runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ...evidence import line_count, message_text, utf16_len
from ...ledger import Entry
from ...messages import Role, ToolCall, sha256_hex, user_words
from .._board import board_in
from .._render import error_excerpt
from .._task import made_draft, started_step, waited_steps
from ._config import EngineConfig

__all__ = ["WorkState"]

_PATH_KEYS = ("file_path", "path", "filename", "target_file", "notebook_path", "file")
_CONTENT_KEYS = ("content", "file_text", "contents")
# "Exit code: 1", '"exit_code": 0', "exited with code 2", "returncode=0", "Exit status 1".
_EXIT = re.compile(
    r"(?i)(?:exit(?:ed)?(?: with)?[ _](?:code|status)|returncode|exit_code)\W{0,3}(-?\d+)"
)
_PATCH_PATH = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_REQUEST_HEAD = 300
_OPEN_CALLS = 10
_PLAN_ITEMS = 30
_ITEM_CHARS = 200
_DRAFTS = 16


def _args(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _first_str(args: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _exit_code(text: str) -> int | None:
    # Shells print the status last; look at the end first, then at the start (JSON envelopes).
    for window in (text[-2_000:], text[:300]):
        found = _EXIT.findall(window)
        if found:
            return int(found[-1])
    return None


@dataclass(slots=True)
class WorkState:
    """Requests, plan, board, files, commands, errors, open calls and evidence, as JSON-able
    values."""

    first_seq: int | None = None
    last_seq: int | None = None
    steps: int = 0
    results: int = 0
    generation: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    requests_total: int = 0
    plan: dict[str, Any] | None = None
    # The newest board a board operation's result showed (BRD-2): ``{"seq", "entry", "tool",
    # "text"}``.
    board: dict[str, Any] | None = None
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    commands: list[dict[str, Any]] = field(default_factory=list)
    commands_total: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    errors_total: int = 0
    open_calls: list[dict[str, Any]] = field(default_factory=list)
    # ENG-2: the work steps (by number, as text) and drafts the covered steps started, collected
    # and made (:mod:`comal.context._task`).
    work_steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    drafts: list[dict[str, Any]] = field(default_factory=list)
    refs: list[dict[str, Any]] = field(default_factory=list)
    refs_total: int = 0
    prior_text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkState:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})

    # -- folding ------------------------------------------------------------------------------
    def fold(self, entries: list[Entry], config: EngineConfig) -> None:
        """Fold one group of entries (a step, or a single user/system message)."""
        if not entries:
            return
        if self.first_seq is None:
            self.first_seq = entries[0].seq
        self.last_seq = entries[-1].seq
        results = {
            e.message.tool_result.call_id: e for e in entries if e.message.tool_result is not None
        }
        calls = {c.id: c for e in entries for c in e.message.tool_calls}
        for entry in entries:
            message = entry.message
            if message.role is Role.USER:
                self._request(entry, config)
            for call in message.tool_calls:
                self._call(entry, call, results.get(call.id), config)
            result = message.tool_result
            if result is not None:
                made = calls.get(result.call_id)
                self._result(entry, result.name or (made.name if made else None), config)
                self._work(entry, made)
        if entries[0].message.role is Role.ASSISTANT:
            self.steps += 1

    def _request(self, entry: Entry, config: EngineConfig) -> None:
        # The user's words: the preamble the agent put first is context, not a request.
        text, start = user_words(entry.message)
        if not text:
            text = f"(no text; {len(entry.message.parts)} attachments)"
        record: dict[str, Any] = {"seq": entry.seq, "entry": entry.id}
        if len(text) <= config.checkpoint_request_chars:
            record["text"] = text
        else:
            # The digest is the whole field's (what EvidenceRead checks); the offset is where
            # the words start in it.
            whole = message_text(entry.message)
            record |= {
                "text": text[:_REQUEST_HEAD],
                "digest": sha256_hex(whole),
                "units": utf16_len(text),
                "offset": utf16_len(whole[:start]),
            }
        self.requests_total += 1
        self.requests.append(record)
        # The first request is usually the task itself: keep it and the newest ones.
        if len(self.requests) > config.checkpoint_max_requests:
            del self.requests[1]

    def _touch(self, path: str, op: str, tool: str, entry: Entry, digest: str | None) -> None:
        self.files.pop(path, None)  # re-insert: the dict stays ordered oldest touch first
        self.files[path] = {"op": op, "tool": tool, "seq": entry.seq, "digest": digest}

    def _call(
        self, entry: Entry, call: ToolCall, result: Entry | None, config: EngineConfig
    ) -> None:
        if result is None:
            self.open_calls.append({"seq": entry.seq, "tool": call.name, "id": call.id})
            del self.open_calls[:-_OPEN_CALLS]
            return
        failed = result.message.tool_result is not None and result.message.tool_result.is_error
        args = _args(call)
        name = call.name
        op = None
        if name in config.editor_tools:
            op = {"view": "read", "create": "write"}.get(str(args.get("command")), "edit")
        elif name in config.read_tools:
            op = "read"
        elif name in config.write_tools:
            op = "write"
        elif name in config.edit_tools:
            op = "edit"
        if op is not None and not failed:
            paths = [p] if (p := _first_str(args, _PATH_KEYS)) else []
            if not paths and name == "apply_patch":
                patch = call.arguments if not args else _first_str(args, ("input", "patch"))
                paths = _PATCH_PATH.findall(patch or "")
            for path in paths:
                digest = None
                if op == "read":
                    digest = result.output_digest
                elif op == "write" and (content := _first_str(args, _CONTENT_KEYS)) is not None:
                    digest = sha256_hex(content)
                self._touch(path.strip(), op, name, entry, digest)
            while len(self.files) > 2 * config.checkpoint_max_files:
                oldest = min(self.files, key=lambda p: (self.files[p]["seq"], p))
                del self.files[oldest]
        if name in config.command_tools:
            command = args.get("command", args.get("cmd"))
            if isinstance(command, list):
                command = " ".join(str(c) for c in command)
            if not isinstance(command, str):
                command = call.arguments
            output = result.message.tool_result.text if result.message.tool_result else ""
            record = {"seq": entry.seq, "command": _cut(command, _ITEM_CHARS)}
            record |= {"exit": _exit_code(output), "failed": failed}
            self.commands_total += 1
            self.commands.append(record)
            del self.commands[: -config.checkpoint_max_commands]
        if name in config.plan_tools:
            self.plan = self._plan(entry, call, args)

    @staticmethod
    def _plan(entry: Entry, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
        items: list[list[str]] = []
        raw = args.get("todos", args.get("plan"))
        if isinstance(raw, list):
            for item in raw[:_PLAN_ITEMS]:
                if isinstance(item, dict):
                    text = item.get("content", item.get("step", item.get("title", "")))
                    items.append([str(item.get("status", "")), _cut(str(text), _ITEM_CHARS)])
                else:
                    items.append(["", _cut(str(item), _ITEM_CHARS)])
        plan: dict[str, Any] = {"seq": entry.seq, "tool": call.name, "items": items}
        if not items:
            plan["text"] = _cut(raw if isinstance(raw, str) else call.arguments, 4 * _ITEM_CHARS)
        return plan

    def _work(self, entry: Entry, call: ToolCall | None) -> None:
        """ENG-2: what a work operation's result says of a step or a draft."""
        name = entry.message.tool_result.name if entry.message.tool_result else None
        if name == "WorkStepRun" and (started := started_step(entry, call)) is not None:
            known = self.work_steps.get(str(started["n"]), {})
            self.work_steps[str(started["n"])] = known | started
        elif name == "WorkStepWait":
            for said in waited_steps(entry):
                known = self.work_steps.get(str(said["n"]), {"n": said["n"]})
                self.work_steps[str(said["n"])] = known | said
        elif name == "WorkDraft" and (draft := made_draft(entry)) is not None:
            self.drafts.append(draft)
            del self.drafts[:-_DRAFTS]

    def _result(self, entry: Entry, tool: str | None, config: EngineConfig) -> None:
        result = entry.message.tool_result
        assert result is not None
        self.results += 1
        self.open_calls = [c for c in self.open_calls if c["id"] != result.call_id]
        self.board = board_in(entry) or self.board
        text = result.text
        record = {
            "seq": entry.seq,
            "entry": entry.id,
            "tool": tool,
            "digest": entry.output_digest or sha256_hex(text),
            "units": utf16_len(text),
            "lines": line_count(text),
        }
        if result.is_error:
            self.errors_total += 1
            self.errors.append(record | {"excerpt": error_excerpt(text)})
            del self.errors[: -config.checkpoint_max_errors]
        self.refs_total += 1
        self.refs.append(record)
        del self.refs[: -config.checkpoint_max_refs]
