"""mini-swe-agent ``.traj.json``: format 1.1 (``{info, messages, trajectory_format}``) and v1
(a bare list of ``{role, content}``, or ``trajectory_format: mini-swe-agent-1``).

1.1 messages are OpenAI Chat messages with extras: a ``tool`` message answers the assistant's
``tool_calls[].id``; ``extra.response`` is the provider response, whose ``usage`` is the
per-call token count; DeepSeek reasoning is in ``reasoning_content``. The closing ``exit``
message is the run's outcome, not something the model saw, so it goes to meta.

v1 messages carry the command in one fenced block of the assistant's text and its output in the
next ``user`` message: that becomes a synthetic ``bash`` call ``pos-<index>`` and its result.
An assistant turn with no block, or with several, was a format error in mini-swe-agent, and
the ``user`` message after it is the error feedback, kept as a user message.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from comal.messages import Part, Role, Text, ToolCall, ToolResult

from ._base import Faults, ImportedSession, RecordError, SessionBuilder
from ._fields import as_dict, json_text, opt, req
from ._jsonio import JsonDoc, read_json, records
from ._plain import openai_content, openai_reasoning, openai_result_content, openai_tool_calls

# mini-swe-agent's own action regex accepts these fence languages.
_ACTION = re.compile(r"```(?:mswea_bash_command|bash|sh)\s*\n(.*?)\n```", re.DOTALL)
_ROLES = {"system": Role.SYSTEM, "user": Role.USER}


def _response_message(msg: dict[str, Any]) -> dict[str, Any]:
    response = msg.get("extra", {}).get("response") if isinstance(msg.get("extra"), dict) else None
    choices = response.get("choices") if isinstance(response, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    return message if isinstance(message, dict) else {}


def _usage(msg: dict[str, Any]) -> tuple[dict[str, Any], str | None] | None:
    extra = opt(msg, "extra", dict)
    response = opt(extra, "response", dict, "extra") if extra else None
    if not response:
        return None
    usage = opt(response, "usage", dict, "extra.response")
    return (usage, opt(response, "model", str, "extra.response")) if usage else None


def _stamps(msg: dict[str, Any]) -> tuple[object, object]:
    """``(extra.response.created, extra.timestamp)`` of a message (Unix seconds, or absent)."""
    extra = msg.get("extra")
    if not isinstance(extra, dict):
        return None, None
    response = extra.get("response")
    return (response.get("created") if isinstance(response, dict) else None), extra.get("timestamp")


def _iso(stamps: tuple[object, ...]) -> str | None:
    for stamp in stamps:
        if isinstance(stamp, int | float) and not isinstance(stamp, bool):
            try:
                return datetime.fromtimestamp(stamp, UTC).isoformat()
            except (OverflowError, OSError, ValueError):
                continue
    return None


def _created(msg: dict[str, Any]) -> str | None:
    """When the provider answered this message (``extra.response.created``, else
    ``extra.timestamp``: Unix seconds), as an ISO time; None when neither is a time."""
    return _iso(_stamps(msg))


def _when(msg: dict[str, Any]) -> str | None:
    """When the run wrote this message (``extra.timestamp``, else the response's
    ``created``): the time an entry keeps; None when the run recorded neither."""
    return _iso(_stamps(msg)[::-1])


def _one(path: Path, faults: Faults, doc: JsonDoc, n: int) -> ImportedSession:
    value = doc.value
    meta: dict[str, Any] = {}
    base: tuple[str | int, ...] = ()
    if isinstance(value, list):
        seq = value
        meta["trajectory_format"] = "mini-swe-agent-1 (bare list)"
    elif isinstance(value, dict) and isinstance(value.get("messages"), list):
        seq, base = value["messages"], ("messages",)
        meta["trajectory_format"] = value.get("trajectory_format")
        if isinstance(value.get("instance_id"), str):
            meta["instance_id"] = value["instance_id"]
        info = value.get("info")
        if isinstance(info, dict):
            for k in ("exit_status", "submission", "model_stats", "mini_version"):
                if k in info:
                    meta[k] = info[k]
            config = info.get("config")
            model = config.get("model") if isinstance(config, dict) else None
            if isinstance(model, dict) and isinstance(model.get("model_name"), str):
                meta["model"] = model["model_name"]
    else:
        raise faults.fatal(
            "expected a mini-swe-agent trajectory (an object with 'messages', "
            "or a list of messages)"
        )
    b = SessionBuilder(faults)
    pending: str | None = None
    for i, raw in records(doc, seq, base, faults):
        at = (*base, i)
        try:
            msg = as_dict(raw, "")
            role = req(msg, "role", str)
            content = msg.get("content")
            b.when = _when(msg)
            if role == "assistant":
                # Some runs keep the reasoning only in the stored provider response.
                has_own = "reasoning_content" in msg or "thinking_blocks" in msg
                reply = msg if has_own else _response_message(msg)
                calls = openai_tool_calls(msg, "", f"pos-{i}")
                text = [
                    p
                    for p in openai_content(content, "content")
                    if not (isinstance(p, Text) and not p.text)
                ]
                parts: list[Part] = [*openai_reasoning(reply, ""), *text]
                pending = None
                if not calls and "tool_calls" not in msg:
                    found = _ACTION.findall("\n".join(p.text for p in text if isinstance(p, Text)))
                    if len(found) == 1:
                        pending = f"pos-{i}"
                        calls = [ToolCall(pending, "bash", json_text({"command": found[0]}))]
                usage = _usage(msg)
                if "started_at" not in meta:
                    started = _created(msg)
                    if started is not None:
                        meta["started_at"] = started  # the run's first model reply
                index = b.add(Role.ASSISTANT, [*parts, *calls], at=at)
                if usage is not None:
                    b.usage(index, "openai_chat", *usage)
            elif role == "tool":
                cid = req(msg, "tool_call_id", str)
                b.tool(ToolResult(cid, openai_result_content(content, "content")), at=at)
            elif role == "user" and pending is not None:
                b.tool(ToolResult(pending, openai_result_content(content, "content")), at=at)
                pending = None
            elif role in _ROLES:
                b.add(_ROLES[role], list(openai_content(content, "content")), at=at)
            elif role == "exit":
                meta["exit"] = {"content": content, "extra": msg.get("extra")}
            else:
                raise RecordError(f"unknown role {role!r}", "role")
        except RecordError as exc:
            faults.bad(exc.reason, at=at, field=exc.field)
    if isinstance(value, dict) and isinstance(value.get("instance_id"), str) and n == 0:
        key = value["instance_id"]
    else:
        stem = path.name.removesuffix(".json").removesuffix(".traj")
        key = stem if n == 0 else f"{stem}#{n}"
    return b.finish(source=str(path), format="mini-swe-agent", key=key, meta=meta)


def load(path: Path, faults: Faults) -> list[ImportedSession]:
    return [_one(path, faults, doc, n) for n, doc in enumerate(read_json(path, faults))]
