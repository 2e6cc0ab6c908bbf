"""OpenHands event streams: an event list (JSON), or evaluation output (JSONL, one instance per
line with the event list in ``history``).

An agent action with ``tool_call_metadata`` is a tool call. Actions from one model response
share ``model_response.id`` and become one assistant message, whose text and call arguments come
from that response (the exact model output) when it is stored, else from the action's args. An
observation answers the action named by its ``cause`` (or, failing that, its
``tool_call_metadata.tool_call_id``); its ``content`` is the tool result, exactly.

``message`` actions are user or assistant text, the ``system`` action the system prompt. An
observation that answers no tool call but is shown to the model (an ``error`` from a malformed
call, a command the user ran) becomes a user message. State changes, recalls, null
observations and other bookkeeping are skipped and counted in meta (``skipped_events``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from comal.messages import Part, Role, Text, ToolCall, ToolResult

from ._base import At, Faults, ImportedSession, RecordError, SessionBuilder
from ._fields import as_dict, json_text, media_from_url, opt, req
from ._jsonio import JsonDoc, head, iter_jsonl, read_json, records

# Observations that record the runtime's state, not anything the model reads.
_BOOKKEEPING = {"agent_state_changed", "null", "recall", "condense", "agent_condensation"}
# Action args that are OpenHands' own bookkeeping, not arguments the model wrote.
_NOT_ARGS = {
    "thought",
    "blocking",
    "is_static",
    "cwd",
    "hidden",
    "confirmation_state",
    "security_risk",
    "is_confirmed",
    "impl_source",
    "keep_prompt",
}


def _response(tcm: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The model response id and its first choice's message, when stored."""
    resp = tcm.get("model_response")
    if not isinstance(resp, dict):
        return None, None
    choices = resp.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    msg = first.get("message") if isinstance(first, dict) else None
    rid = resp.get("id")
    return (rid if isinstance(rid, str) else None), (msg if isinstance(msg, dict) else None)


class _Stream:
    def __init__(self, faults: Faults) -> None:
        self.b = SessionBuilder(faults)
        self.calls: dict[int, str] = {}  # action event id -> tool call id
        self.call_ids: set[str] = set()
        self.last_response: tuple[str, int] | None = None  # (response id, message index)
        self.usage_done: set[str] = set()
        self.skipped: Counter[str] = Counter()
        self.meta: dict[str, Any] = {}
        self.rebuilt = 0  # calls whose arguments came from the action's args

    def event(self, ev: dict[str, Any], at: At) -> None:
        stamp = ev.get("timestamp")
        self.b.when = stamp if isinstance(stamp, str) else None
        if isinstance(stamp, str) and "started_at" not in self.meta:
            self.meta["started_at"] = stamp  # the session starts when its events did
        if "action" in ev:
            self.action(ev, req(ev, "action", str), at)
        elif "observation" in ev:
            self.observation(ev, req(ev, "observation", str), at)
        else:
            raise RecordError("event has neither 'action' nor 'observation'", "action")

    def action(self, ev: dict[str, Any], kind: str, at: At) -> None:
        args = opt(ev, "args", dict) or {}
        tcm = opt(ev, "tool_call_metadata", dict)
        source = opt(ev, "source", str)
        if tcm is not None:
            self.tool_call(ev, args, tcm, at)
            return
        self.last_response = None
        if kind == "system":
            self.b.add(Role.SYSTEM, [Text(req(args, "content", str, "args"))], at=at)
            if "tools" in args and "tools" not in self.meta:
                self.meta["tools"] = args["tools"]
        elif kind == "message":
            parts: list[Part] = [Text(req(args, "content", str, "args"))]
            for k, url in enumerate(opt(args, "image_urls", list, "args") or []):
                if not isinstance(url, str):
                    raise RecordError("an image URL is not a string", f"args.image_urls[{k}]")
                parts.append(media_from_url(url))
            role = Role.USER if source == "user" else Role.ASSISTANT
            self.b.add(role, parts, at=at)
        else:
            self.skipped[f"action:{kind}"] += 1

    def tool_call(
        self, ev: dict[str, Any], args: dict[str, Any], tcm: dict[str, Any], at: At
    ) -> None:
        cid = req(tcm, "tool_call_id", str, "tool_call_metadata")
        name = req(tcm, "function_name", str, "tool_call_metadata")
        event_id = opt(ev, "id", int)
        rid, reply = _response(tcm)
        arguments = None
        text = None
        if reply is not None:
            for call in reply.get("tool_calls") or []:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(call, dict) and call.get("id") == cid and isinstance(fn, dict):
                    arguments = (
                        fn.get("arguments") if isinstance(fn.get("arguments"), str) else None
                    )
            text = reply.get("content") if isinstance(reply.get("content"), str) else None
        if arguments is None:
            # No stored response: rebuild the arguments from the action's args.
            arguments = json_text({k: v for k, v in args.items() if k not in _NOT_ARGS})
            self.rebuilt += 1
        if text is None:
            text = args.get("thought") if isinstance(args.get("thought"), str) else None
        call = ToolCall(cid, name, arguments)
        if rid is not None and self.last_response and self.last_response[0] == rid:
            self.b.extend(self.last_response[1], [call], at=at)
        else:
            index = self.b.add(Role.ASSISTANT, [*([Text(text)] if text else []), call], at=at)
            self.last_response = (rid, index) if rid is not None else None
            usage = tcm.get("model_response", {}).get("usage") if rid else None
            if rid is not None and rid not in self.usage_done and isinstance(usage, dict):
                self.usage_done.add(rid)
                model = tcm["model_response"].get("model")
                self.b.usage(index, "openai_chat", usage, model if isinstance(model, str) else None)
        if event_id is not None:
            self.calls[event_id] = cid
        self.call_ids.add(cid)

    def observation(self, ev: dict[str, Any], kind: str, at: At) -> None:
        cause = opt(ev, "cause", int)
        tcm = opt(ev, "tool_call_metadata", dict)
        cid = self.calls.get(cause) if cause is not None else None
        if cid is None and tcm is not None and tcm.get("tool_call_id") in self.call_ids:
            cid = tcm["tool_call_id"]
        if cid is not None:
            content = req(ev, "content", str)
            self.b.tool(ToolResult(cid, content, is_error=kind == "error"), at=at)
            return
        if kind in _BOOKKEEPING:
            self.skipped[f"observation:{kind}"] += 1
            return
        content = req(ev, "content", str)
        # Shown to the model as a user turn (OpenHands renders these for the LLM that way).
        self.last_response = None
        self.b.add(Role.USER, [Text(content)], at=at)


def _doc_events(stream: _Stream, faults: Faults, doc: JsonDoc) -> None:
    for i, raw in records(doc, doc.value, (), faults):
        try:
            stream.event(as_dict(raw, ""), (i,))
        except RecordError as exc:
            faults.bad(exc.reason, at=(i,), field=exc.field)


def _finish(
    stream: _Stream, path: Path, key: str, title: str | None, meta: dict[str, Any]
) -> ImportedSession:
    meta = {**stream.meta, **meta, "skipped_events": dict(stream.skipped)}
    if stream.rebuilt:
        meta["arguments_from_args"] = stream.rebuilt
    return stream.b.finish(source=str(path), format="openhands", key=key, title=title, meta=meta)


def load(path: Path, faults: Faults) -> list[ImportedSession]:
    # An event list is one JSON array; evaluation output is one JSON object per line.
    if head(path, 4096).lstrip().startswith(b"["):
        out = []
        for n, doc in enumerate(read_json(path, faults)):
            if not isinstance(doc.value, list):
                raise faults.fatal("expected a list of OpenHands events")
            stream = _Stream(faults)
            _doc_events(stream, faults, doc)
            key = path.stem if n == 0 else f"{path.stem}#{n}"
            out.append(_finish(stream, path, key, None, {}))
        return out
    return _load_eval(path, faults)


def _load_eval(path: Path, faults: Faults) -> list[ImportedSession]:
    out: list[ImportedSession] = []
    for lineno, rec in iter_jsonl(path, faults):
        try:
            d = as_dict(rec, "")
            history = req(d, "history", list)
            key = opt(d, "instance_id", str) or f"{path.stem}:{lineno}"
        except RecordError as exc:
            faults.bad(exc.reason, at=lineno, field=exc.field)
            continue
        stream = _Stream(faults)
        for i, raw in enumerate(history):
            try:
                stream.event(as_dict(raw, ""), lineno)
            except RecordError as exc:
                field = f"history[{i}]" + (f".{exc.field}" if exc.field else "")
                faults.bad(exc.reason, at=lineno, field=field)
        meta: dict[str, Any] = {"line": lineno}
        for k in ("instance_id", "metrics", "test_result", "error"):
            if k in d:
                meta[k] = d[k]
        md = d.get("metadata")
        if isinstance(md, dict):
            meta["agent_class"] = md.get("agent_class")
            llm = md.get("llm_config")
            if isinstance(llm, dict) and isinstance(llm.get("model"), str):
                meta["model"] = llm["model"]  # only the name: llm_config may hold credentials
        instance = d.get("instance")
        title = None
        if isinstance(instance, dict) and isinstance(instance.get("problem_statement"), str):
            title = instance["problem_statement"].strip().split("\n", 1)[0][:200] or None
        out.append(_finish(stream, path, key, title, meta))
    return out
