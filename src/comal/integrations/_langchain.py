"""comal inside LangChain v1: an agent middleware for ``langchain.agents.create_agent``.

::

    from comal.integrations import ComalMiddleware
    comal = ComalMiddleware(ledger, window=128_000, engine="limit")   # session=... resumes
    agent = create_agent(model, tools=[...], middleware=[comal])

``wrap_model_call`` records what is new in the agent's state (user messages, tool results) in
the ledger, replaces the messages sent to the model with comal's assembly under ``window`` (the
system message and tool schemas the agent sends are budgeted, and sent as they are), and records
the model's reply with the request record. ``wrap_tool_call`` records every tool's result as it
returns, and runs the engine's recall tools (``middleware.tools``: EvidenceRead, ``ctx_*`` under
``dag``, ``session_search`` under ``pipeline``, ``memory_search``) through comal's house. The
agent's state keeps the framework's own messages; the ledger keeps them byte for byte.

Messages cross through OpenAI Chat form (``convert_to_openai_messages`` and
``convert_to_messages``), so what that form does not carry is not kept: a tool call's arguments
are stored as LangChain parsed them (re-serialised JSON, not the model's raw text), a
``ToolMessage``'s ``status="error"`` and ``artifact``, and provider-specific
``additional_kwargs`` / ``response_metadata``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..ledger import LedgerBackend
from ..messages import Message
from ..messages.wire import from_openai_chat, to_openai_chat
from ..tokens import Usage
from ._core import LedgerSession, RecallTool, require

require("langchain.agents", "langchain")

from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

__all__ = ["ComalMiddleware", "to_comal", "to_langchain"]


def to_comal(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages as canonical messages (through OpenAI Chat form)."""
    if not messages:
        return []
    wire = convert_to_openai_messages(list(messages))
    return from_openai_chat(wire if isinstance(wire, list) else [wire])


def to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    """Canonical messages (an assembly: references, summaries and checkpoints rendered as
    text) as LangChain messages."""
    wire: list[Any] = list(to_openai_chat(list(messages)))
    return list(convert_to_messages(wire))


def _keyed(message: BaseMessage) -> str:
    # The reducer keeps an id it is given: one set here is the key the state will hold.
    if not message.id:
        message.id = f"comal-{uuid.uuid4()}"
    return str(message.id)


def _usage(message: BaseMessage) -> Usage | None:
    meta = getattr(message, "usage_metadata", None)
    if not meta:
        return None
    cached = (meta.get("input_token_details") or {}).get("cache_read")
    new = meta.get("input_tokens")
    if new is not None and cached:
        new -= cached
    return Usage(new, cached, None, meta.get("output_tokens"), None)


def _tool_specs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = []
    for tool in tools:
        spec = tool if isinstance(tool, Mapping) else convert_to_openai_tool(tool)
        specs.append(dict(spec))
    return specs


class ComalMiddleware(AgentMiddleware):
    """The ledger, the engine's assembly and its recall tools for an agent; see the module
    docstring. Arguments are :class:`~comal.integrations.LedgerSession`'s."""

    def __init__(self, ledger: LedgerBackend, **options: Any) -> None:
        super().__init__()
        self.comal = LedgerSession(ledger, framework="langchain", **options)
        recall = self.comal.recall_tools()
        self._recall = {t.name for t in recall}
        self.tools = [self._tool(t) for t in recall]

    @property
    def session_id(self) -> str:
        return self.comal.session_id

    def _tool(self, spec: RecallTool) -> BaseTool:
        def unrouted(**arguments: Any) -> str:
            # A call reaches the house through wrap_tool_call, which knows its call id.
            return self.comal.recall(spec.name, json.dumps(arguments), f"comal-{uuid.uuid4()}")[0]

        return StructuredTool.from_function(
            func=unrouted, name=spec.name, description=spec.description,
            args_schema=spec.parameters,
        )  # fmt: skip

    # -- the model call ------------------------------------------------------------------------
    def _before(self, request: Any) -> Any:
        # Only what the ledger does not hold yet is converted: the state grows every call.
        new = [m for m in request.messages if not self.comal.knows(_keyed(m))]
        keys = [_keyed(m) for m in new]
        self.comal.record(list(zip(keys, to_comal(new), strict=True)))
        system = request.system_message
        assembled = self.comal.assemble(
            system=to_comal([system]) if isinstance(system, SystemMessage) else (),
            tools=_tool_specs(request.tools),
        )
        return request.override(messages=to_langchain(assembled.messages))

    def _after(self, response: Any, request: Any) -> None:
        replies = response.result if hasattr(response, "result") else [response]
        model = getattr(request.model, "model_name", None) or type(request.model).__name__
        for reply in replies:
            key = _keyed(reply)
            (message,) = to_comal([reply])
            if isinstance(reply, AIMessage):
                self.comal.record_reply(message, key=key, usage=_usage(reply), model=str(model))
            else:  # what a structured-output strategy adds beside the reply
                self.comal.record([(key, message)])

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        sent = self._before(request)
        response = handler(sent)
        self._after(response, sent)
        return response

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        # The ledger is synchronous: its work crosses to a thread at this async edge.
        sent = await asyncio.to_thread(self._before, request)
        response = await handler(sent)
        await asyncio.to_thread(self._after, response, sent)
        return response

    # -- tool calls ----------------------------------------------------------------------------
    def _run_recall(self, call: Mapping[str, Any]) -> ToolMessage:
        text, error = self.comal.recall(call["name"], json.dumps(call["args"]), call["id"])
        message = ToolMessage(
            content=text, tool_call_id=call["id"], name=call["name"],
            status="error" if error else "success",
        )  # fmt: skip
        self._record_result(message)
        return message

    def _record_result(self, result: Any) -> None:
        if isinstance(result, ToolMessage):
            key = _keyed(result)
            self.comal.record(list(zip([key], to_comal([result]), strict=True)))

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if request.tool_call["name"] in self._recall:
            return self._run_recall(request.tool_call)
        result = handler(request)
        self._record_result(result)
        return result

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        if request.tool_call["name"] in self._recall:
            return await asyncio.to_thread(self._run_recall, request.tool_call)
        result = await handler(request)
        await asyncio.to_thread(self._record_result, result)
        return result
