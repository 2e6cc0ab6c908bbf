"""OpenAI Codex CLI rollout JSONL: ``{timestamp, type, payload}`` per line.

``response_item`` payloads are Responses-API items. Output items of one model response
(reasoning, assistant text, function and custom tool calls) arrive in a run with no input item
between them, and become one assistant message; an input item (a user message, a call output)
ends the run. Call outputs are kept exactly as stored: in CLI 0.5x ``output`` is a JSON *string*
wrapping the text and exit code, and unwrapping it would change what the model saw.

Usage comes from ``event_msg`` ``token_count`` (``last_token_usage``). The CLI repeats the
same count after each tool run, so a count whose running total did not change is a repeat. A
new count belongs to the response whose items follow it (CLI 0.58 writes the count first), or
to the response still open when it arrives (later versions write it after the items). A
``turn_context`` line, or a new count while the open response already has one, starts a new
response even when the input item between them is missing.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from comal.messages import Part, Reasoning, Role, Text, ToolCall, ToolResult
from comal.messages.wire import PROVIDER_OPENAI_RESPONSES

from ._base import Faults, ImportedSession, RecordError, SessionBuilder
from ._fields import as_dict, json_text, opt, req
from ._jsonio import iter_jsonl
from ._plain import openai_content

_INPUT_ROLES = {"user": Role.USER, "developer": Role.DEVELOPER, "system": Role.SYSTEM}
_SESSION_KEYS = (
    "id",
    "cwd",
    "originator",
    "cli_version",
    "source",
    "model_provider",
    "git",
    "instructions",
)


def _output_parts(item: dict[str, Any], kind: str) -> list[Part] | None:
    """Parts for an output item of a model response, or None if ``kind`` is not one."""
    if kind == "message":
        return [
            p
            for p in openai_content(item.get("content"), "payload.content")
            if not (isinstance(p, Text) and not p.text)
        ]
    if kind == "reasoning":
        summary = tuple(
            req(as_dict(s, "payload.summary"), "text", str, "payload.summary")
            for s in opt(item, "summary", list, "payload") or []
        )
        content = opt(item, "content", list, "payload") or []
        text = "\n".join(
            req(as_dict(c, "payload.content"), "text", str, "payload.content") for c in content
        )
        return [
            Reasoning(
                text,
                data=opt(item, "encrypted_content", str, "payload"),
                summary=summary,
                id=opt(item, "id", str, "payload"),
                provider=PROVIDER_OPENAI_RESPONSES,
            )
        ]
    if kind == "function_call":
        return [
            ToolCall(
                req(item, "call_id", str, "payload"),
                req(item, "name", str, "payload"),
                req(item, "arguments", str, "payload"),
            )
        ]
    if kind == "custom_tool_call":
        return [
            ToolCall(
                req(item, "call_id", str, "payload"),
                req(item, "name", str, "payload"),
                req(item, "input", str, "payload"),
                call_type="custom",
            )
        ]
    if kind == "local_shell_call":
        cid = opt(item, "call_id", str, "payload") or req(item, "id", str, "payload")
        action = as_dict(item.get("action"), "payload.action")
        return [ToolCall(cid, "local_shell", json_text(action))]
    return None


def _output_content(item: dict[str, Any]) -> str | tuple[Any, ...]:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return tuple(openai_content(output, "payload.output"))
    kind = "missing" if output is None else type(output).__name__
    raise RecordError(f"'output' is {kind}, expected str or list", "payload.output")


def _exit_code(output: str) -> int | None:
    if not output.startswith("{"):
        return None
    try:
        meta = json.loads(output).get("metadata")
    except (ValueError, AttributeError):
        return None
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    return code if isinstance(code, int) else None


class _Rollout:
    def __init__(self, faults: Faults) -> None:
        self.b = SessionBuilder(faults)
        self.open: int | None = None  # the assistant message of the response being written
        self.pending: tuple[dict[str, Any], str | None] | None = None
        self.last_total: Any = None
        self.model: str | None = None
        self.meta: dict[str, Any] = {}
        self.skipped: Counter[str] = Counter()
        self.exit_codes: dict[str, int] = {}
        self.summaries: list[str] = []

    def line(self, lineno: int, rec: dict[str, Any]) -> None:
        stamp = rec.get("timestamp")
        self.b.when = stamp if isinstance(stamp, str) else None
        if isinstance(stamp, str) and "started_at" not in self.meta:
            self.meta["started_at"] = stamp  # the session starts when its transcript did
        kind = req(rec, "type", str)
        payload = req(rec, "payload", dict)
        if kind == "session_meta":
            self.meta.update({k: payload[k] for k in _SESSION_KEYS if k in payload})
        elif kind == "turn_context":
            # Written before each model request: whatever follows is a new response.
            self.open = None
            self.model = opt(payload, "model", str, "payload") or self.model
            for k in ("model", "effort", "approval_policy", "sandbox_policy", "cwd"):
                if k in payload:
                    self.meta.setdefault("turn_context", {})[k] = payload[k]
        elif kind == "response_item":
            self.item(lineno, payload)
        elif kind == "event_msg" and payload.get("type") == "token_count":
            self.token_count(payload)
        elif kind == "compacted":
            # The summary replaces the history in the model's context; the history itself
            # stays in this import (nothing is lost), the summary text is kept in meta.
            self.summaries.append(str(payload.get("message", "")))
            self.skipped["compacted"] += 1
        else:
            self.skipped[f"{kind}:{payload.get('type')}" if kind == "event_msg" else kind] += 1

    def item(self, lineno: int, item: dict[str, Any]) -> None:
        kind = req(item, "type", str, "payload")
        role = opt(item, "role", str, "payload")
        if kind == "message" and role != "assistant":
            if role not in _INPUT_ROLES:
                raise RecordError(f"unknown message role {role!r}", "payload.role")
            inputs: list[Part] = [*openai_content(item.get("content"), "payload.content")]
            self.open = None
            self.b.add(_INPUT_ROLES[role], inputs, at=lineno)
            return
        if kind in ("function_call_output", "custom_tool_call_output"):
            cid = req(item, "call_id", str, "payload")
            content = _output_content(item)
            self.open = None
            self.b.tool(ToolResult(cid, content), at=lineno)
            if isinstance(content, str) and (code := _exit_code(content)) is not None:
                self.exit_codes[cid] = code
            return
        parts = _output_parts(item, kind)
        if parts is None:
            # ghost_snapshot (an undo point, never sent to the model), web_search_call (no
            # output item to pair with), and item types newer than this importer.
            self.skipped[f"response_item:{kind}"] += 1
            return
        if self.open is None:
            self.open = self.b.add(Role.ASSISTANT, parts, at=lineno)
            if self.pending is not None:
                self.b.usage(self.open, "openai_responses", *self.pending)
                self.pending = None
        else:
            self.b.extend(self.open, parts, at=lineno)

    def token_count(self, payload: dict[str, Any]) -> None:
        info = opt(payload, "info", dict, "payload")
        if info is None:
            self.skipped["token_count:null"] += 1
            return
        total = info.get("total_token_usage")
        if total is not None and total == self.last_total:
            self.skipped["token_count:repeat"] += 1
            return
        self.last_total = total
        last = req(info, "last_token_usage", dict, "payload.info")
        usage = (last, opt(info, "model", str, "payload.info") or self.model)
        if self.open is not None and not self.b.has_usage(self.open):
            self.b.usage(self.open, "openai_responses", *usage)
            return
        # A second count while a response is open means a new model call has started.
        self.open = None
        if self.pending is not None:
            self.b.unattached("openai_responses", *self.pending)
        self.pending = usage


def load(path: Path, faults: Faults) -> list[ImportedSession]:
    r = _Rollout(faults)
    for lineno, rec in iter_jsonl(path, faults):
        try:
            r.line(lineno, as_dict(rec, ""))
        except RecordError as exc:
            faults.bad(exc.reason, at=lineno, field=exc.field)
    if r.pending is not None:
        r.b.unattached("openai_responses", *r.pending)
    meta = dict(r.meta)
    meta["model"] = r.model
    meta["skipped_items"] = dict(r.skipped)
    if r.exit_codes:
        meta["exit_codes"] = r.exit_codes
    if r.summaries:
        meta["compaction_summaries"] = r.summaries
    key = meta.get("id") if isinstance(meta.get("id"), str) else path.stem
    return [r.b.finish(source=str(path), format="codex", key=str(key), meta=meta)]
