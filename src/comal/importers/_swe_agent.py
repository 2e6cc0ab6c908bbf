"""SWE-agent ``.traj``: one JSON object per task instance.

The chat is read from ``history`` (what the model saw), never from every step's ``messages``:
those are full prompt copies that grow the file quadratically. Function-calling configs pair a
``tool`` message with its call through ``tool_call_ids``. Text-action configs have no ids: the
assistant's command (its ``action``, the fenced block in its text) becomes a synthetic ``bash``
call ``pos-<index>``, answered by the next ``user`` message, kept exactly as the model saw it.

Those configs never show the model the result of the final ``submit``; the trajectory's last
step still recorded it, so it closes that call (meta ``final_result_from_trajectory``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from comal.messages import Part, Role, Text, ToolCall, ToolResult

from ._base import Faults, ImportedSession, RecordError, SessionBuilder
from ._fields import as_dict, json_text, opt, req
from ._jsonio import JsonDoc, read_json, records
from ._plain import openai_content, openai_reasoning, openai_result_content, openai_tool_calls

_FENCE = re.compile(r"```[^\n`]*\n(.*?)\n?```", re.DOTALL)
_ROLES = {"system": Role.SYSTEM, "user": Role.USER}


def _command(msg: dict[str, Any], text: str) -> str | None:
    action = opt(msg, "action", str)
    if action is not None:
        return action or None
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else None


def _history(doc: JsonDoc, faults: Faults) -> tuple[list[Any], tuple[str | int, ...]]:
    value = doc.value
    if not isinstance(value, dict):
        raise faults.fatal("expected a SWE-agent trajectory object")
    if isinstance(value.get("history"), list):
        return value["history"], ("history",)
    steps = value.get("trajectory")
    # Old files without history: the last step's prompt copy is the whole chat.
    if isinstance(steps, list) and steps and isinstance(steps[-1], dict):
        msgs = steps[-1].get("messages")
        if isinstance(msgs, list):
            return msgs, ("trajectory", len(steps) - 1, "messages")
    raise faults.fatal("no 'history' list (and no step messages to read instead)", field="history")


def _one(path: Path, faults: Faults, doc: JsonDoc, n: int) -> ImportedSession:
    history, base = _history(doc, faults)
    b = SessionBuilder(faults)
    pending: tuple[str, str] | None = None  # (id, command) of a text action awaiting output
    actions = 0
    agents: dict[str, int] = {}
    for i, raw in records(doc, history, base, faults):
        at = (*base, i)
        try:
            msg = as_dict(raw, "")
            role = req(msg, "role", str)
            content = msg.get("content")
            if isinstance(msg.get("agent"), str):
                agents[msg["agent"]] = agents.get(msg["agent"], 0) + 1
            if role == "assistant":
                calls = openai_tool_calls(msg, "", f"pos-{i}")
                text_parts = [
                    p
                    for p in openai_content(content, "content")
                    if not (isinstance(p, Text) and not p.text)
                ]
                parts: list[Part] = [*openai_reasoning(msg, ""), *text_parts]
                pending = None
                if not calls:
                    command = _command(
                        msg, "\n".join(p.text for p in text_parts if isinstance(p, Text))
                    )
                    if command is not None:
                        pending = (f"pos-{i}", command)
                        calls = [ToolCall(pending[0], "bash", json_text({"command": command}))]
                b.add(Role.ASSISTANT, [*parts, *calls], at=at)
                actions += 1
            elif role == "tool":
                ids = opt(msg, "tool_call_ids", list) or []
                if not ids and isinstance(msg.get("tool_call_id"), str):
                    ids = [msg["tool_call_id"]]
                if not ids or not all(isinstance(x, str) for x in ids):
                    raise RecordError("a tool message without tool_call_ids", "tool_call_ids")
                result = openai_result_content(content, "content")
                # One observation answering several calls: each call gets the same output.
                for cid in ids:
                    b.tool(ToolResult(cid, result), at=at)
            elif role == "user" and pending is not None:
                b.tool(ToolResult(pending[0], openai_result_content(content, "content")), at=at)
                pending = None
            elif role in _ROLES:
                b.add(_ROLES[role], list(openai_content(content, "content")), at=at)
            else:
                raise RecordError(f"unknown role {role!r}", "role")
        except RecordError as exc:
            faults.bad(exc.reason, at=at, field=exc.field)
    value: dict[str, Any] = doc.value
    meta: dict[str, Any] = {"agents": agents}
    if pending is not None:
        steps = value.get("trajectory")
        last = steps[-1] if isinstance(steps, list) and len(steps) == actions else None
        if (
            isinstance(last, dict)
            and isinstance(last.get("observation"), str)
            and str(last.get("action", "")).strip() == pending[1].strip()
        ):
            b.tool(ToolResult(pending[0], last["observation"]), at=("trajectory", actions - 1))
            meta["final_result_from_trajectory"] = True
    info = value.get("info")
    if isinstance(info, dict):
        meta.update({k: info[k] for k in ("exit_status", "submission", "model_stats") if k in info})
    model = _model(value.get("replay_config"))
    if model:
        meta["model"] = model
    if isinstance(value.get("environment"), str):
        meta["environment"] = value["environment"]
    task = _task(value.get("replay_config"))
    key = path.name.removesuffix(".traj") if n == 0 else f"{path.stem}#{n}"
    # Every SWE-agent run opens with the same template, so its first words name no task; the
    # problem statement's id does, and else the file, which SWE-agent names after the task.
    title = task or path.name.removesuffix(".traj")
    return b.finish(source=str(path), format="swe-agent", key=key, title=title, meta=meta)


def _config(config: Any) -> dict[str, Any]:
    """``replay_config`` as an object (a JSON string in current files); empty when it is none."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return {}
    return config if isinstance(config, dict) else {}


def _task(config: Any) -> str | None:
    """The problem statement's id in ``replay_config`` (``marshmallow-code__marshmallow-1867``)."""
    problem = _config(config).get("problem_statement")
    task = problem.get("id") if isinstance(problem, dict) else None
    if not isinstance(task, str):
        return None
    return task.strip()[:200] or None


def _model(config: Any) -> str | None:
    """The model name from ``replay_config`` (a JSON string in current files)."""
    config = _config(config)
    agent = config.get("agent")
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else None


def load(path: Path, faults: Faults) -> list[ImportedSession]:
    return [_one(path, faults, doc, n) for n, doc in enumerate(read_json(path, faults))]
