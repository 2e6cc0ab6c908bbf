"""comal inside LangChain v1: an agent middleware for ``langchain.agents.create_agent``.

::

    from comal.integrations import ComalMiddleware
    comal = ComalMiddleware(ledger, window=128_000, engine="limit")   # session=... resumes
    agent = create_agent(model, tools=[...], middleware=[comal])

``wrap_model_call`` matches the agent's state against the ledger session
(:meth:`LedgerSession.sync`) and records what the session does not hold yet (user messages, tool
results), replaces the messages sent to the model with comal's assembly under ``window`` (the
system message and tool schemas the agent sends are budgeted, and sent as they are), and records
the model's reply with the request record. ``wrap_tool_call`` records every tool's result as it
returns, and runs the engine's recall tools (``middleware.tools``: EvidenceRead, ``ctx_*`` under
``dag``, ``session_search`` under ``pipeline``, ``memory_search``) through comal's house.

LangChain's invariants hold: the state keeps the framework's own messages and their ids (comal
changes neither); while the engine sends every entry unchanged the request goes to the model as
the agent built it, and once it compacts every message the engine sends unchanged is the
state's own object (its id, ``additional_kwargs`` and ``response_metadata`` with it) while
stand-ins are new messages; an ``AIMessage`` with ``tool_calls`` is never sent without the
``ToolMessage`` of each call. The state is the authority: when a ``RemoveMessage`` (or an edit
through an id, or a ``REMOVE_ALL_MESSAGES``) changes messages the session holds, the session
continues in a branch that holds the state as it now is (the old ledger session keeps every
byte), so a removed message is no longer sent. A fresh middleware opened on a session
(``session=``) with a state that shares nothing with it resumes it: the ledger brings the
history the state does not hold.

Messages are recorded in the ledger through OpenAI Chat form (``convert_to_openai_messages``
and ``convert_to_messages``), so what that form does not carry is not kept there (nor in a
stand-in or a resumed history): a tool call's arguments are stored as LangChain parsed them
(re-serialised JSON, not the model's raw text), a ``ToolMessage``'s ``status="error"`` and
``artifact``, and provider-specific ``additional_kwargs`` / ``response_metadata``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..errors import InputError
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


def _key(message: BaseMessage) -> str | None:
    return str(message.id) if message.id else None


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
    docstring. ``recall=False`` offers no recall tools (a model that cannot bind tools: what
    the engine leaves out is then read in the ledger only). The other arguments are
    :class:`~comal.integrations.LedgerSession`'s."""

    def __init__(self, ledger: LedgerBackend, *, recall: bool = True, **options: Any) -> None:
        super().__init__()
        self.comal = LedgerSession(ledger, framework="langchain", **options)
        found = self.comal.recall_tools() if recall else []
        self._recall = {t.name for t in found}
        self.tools = [self._tool(t) for t in found]

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
        messages = list(request.messages)
        with self.comal.lock:
            ids = self.comal.sync(list(zip([_key(m) for m in messages], to_comal(messages),
                                           strict=True)))  # fmt: skip
            system = request.system_message
            assembled = self.comal.prepare(
                system=to_comal([system]) if isinstance(system, SystemMessage) else (),
                tools=_tool_specs(request.tools),
            )
        if assembled.verbatim and self.comal.mirrors(ids):
            return request  # nothing compacted: the model gets the agent's own messages
        own = {i: m for i, m in zip(ids, messages, strict=True) if i is not None}
        sent = to_langchain(assembled.messages)
        for n, (entry, kept) in enumerate(zip(assembled.entry_ids, assembled.kept, strict=True)):
            if kept and entry in own:
                sent[n] = own[entry]  # the state's own message, its id and fields with it
        return request.override(messages=sent)

    def _after(self, response: Any, request: Any) -> None:
        replies = response.result if hasattr(response, "result") else [response]
        model = getattr(request.model, "model_name", None) or type(request.model).__name__
        for reply in replies:
            try:
                (message,) = to_comal([reply])
            except InputError:
                # Not comal's to refuse first (a tool call without an id): the agent's own
                # checks speak, and the state's next model call records it or says why not.
                continue
            if isinstance(reply, AIMessage):
                self.comal.record_reply(
                    message, key=_key(reply), usage=_usage(reply), model=str(model)
                )
            else:  # what a structured-output strategy adds beside the reply
                self.comal.record([(_key(reply), message)])

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
            # once: a recall's result is in the ledger already (the house joined it).
            (message,) = to_comal([result])
            self.comal.record([(_key(result), message)], once=True)

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
