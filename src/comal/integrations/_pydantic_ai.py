"""comal inside pydantic-ai: a history processor, a toolset of recall tools, and a capability.

::

    from comal.integrations import ComalHistory
    comal = ComalHistory(ledger, window=128_000, engine="dag")        # session=... resumes
    agent = Agent(model, tools=[...], capabilities=[comal.capability()])
    # or, as a plain history processor and toolset (``history_processors=[comal]`` before v2):
    agent = Agent(model, capabilities=[ProcessHistory(comal)], toolsets=[comal.toolset])

Before each model request the run's history is matched against the ledger session
(:meth:`LedgerSession.sync`): what the session does not hold yet (the user prompt, tool returns,
and — for the plain processor — the previous reply) is appended, and the model is sent comal's
assembly under ``window``. The history a run is given is the authority: given to a fresh
``ComalHistory`` it is recorded whole and reaches the model whole; a run given a shorter or
another history than the session holds continues the session in a branch that holds it (the
old ledger session is kept whole). While the engine sends every entry unchanged, the model
gets the run's own messages as they are (their timestamps, ids, metadata, thinking and file
parts included); once it compacts, it gets the assembly (references, summaries and checkpoints
rendered as text). The caller's messages are never changed.

The capability also records each reply as it arrives, with its request record, and leaves the
run's own history as the framework built it (it changes only the request); a history
processor, by pydantic-ai's contract, replaces the run's history with what it returns, so once
the engine compacts ``result.all_messages()`` holds the assembly the model saw (the ledger
keeps the originals). Those assembly messages are comal's own objects, marked in their
``metadata`` with the ledger session and how many of its entries they stand for, so a history
that holds them is read as that part of the session rather than recorded again.

Messages are recorded in the ledger through OpenAI Chat form, so what it does not carry is
not kept there: thinking parts, built-in tool parts, files and images in user prompts (their
text only), a tool return's ``metadata``; a non-text tool return is stored as the JSON text
pydantic-ai sends for it. A resumed session with no history given rebuilds its messages from
that form.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..ledger import LedgerBackend
from ..messages import Message
from ..messages.wire import from_openai_chat, to_openai_chat
from ..tokens import Usage
from ._core import LedgerSession, RecallTool, require

require("pydantic_ai", "pydantic-ai")

from pydantic_ai import RunContext  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.tools import Tool  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

__all__ = ["ComalHistory", "to_comal", "to_pydantic_ai"]

MARK = "comal"  # the metadata key of comal's own assembly messages


def _user_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "".join(c for c in part.content if isinstance(c, str))


def _wire(message: ModelMessage) -> list[dict[str, Any]]:
    if isinstance(message, ModelResponse):
        text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
        calls = [
            {
                "id": p.tool_call_id,
                "type": "function",
                "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
            }
            for p in message.parts
            if isinstance(p, ToolCallPart)
        ]
        return [{"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}]
    out: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            out.append({"role": "user", "content": _user_text(part)})
        elif isinstance(part, ToolReturnPart):
            text = part.model_response_str()
            out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": text})
        elif isinstance(part, RetryPromptPart):
            if part.tool_name is None:
                out.append({"role": "user", "content": part.model_response()})
            else:
                text = part.model_response()
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": text})
    return out


def to_comal(messages: Sequence[ModelMessage]) -> list[Message]:
    """pydantic-ai messages as canonical messages (system prompt parts left out: the agent
    sends its own)."""
    wire = [w for m in messages for w in _wire(m)]
    return from_openai_chat(wire) if wire else []


def to_pydantic_ai(
    messages: Sequence[Message], *, mark: Mapping[str, Any] | None = None
) -> list[ModelMessage]:
    """Canonical messages (an assembly, stand-ins rendered as text) as pydantic-ai messages;
    ``mark``: what each message's ``metadata`` says under ``"comal"``."""
    names: dict[str, str] = {}
    out: list[ModelMessage] = []
    pending: list[Any] = []
    metadata = None if mark is None else {MARK: dict(mark)}

    def flush() -> None:
        if pending:
            out.append(ModelRequest(parts=list(pending), metadata=_copy(metadata)))
            pending.clear()

    for item in to_openai_chat(list(messages)):
        wire: dict[str, Any] = dict(item)
        content = wire.get("content")
        text = content if isinstance(content, str) else _joined(content)
        role = wire["role"]
        if role == "assistant":
            flush()
            parts: list[ModelResponsePart] = [TextPart(text)] if text else []
            for call in wire.get("tool_calls") or ():
                fn = call["function"]
                names[call["id"]] = fn["name"]
                parts.append(ToolCallPart(fn["name"], fn["arguments"], tool_call_id=call["id"]))
            out.append(ModelResponse(parts=parts, metadata=_copy(metadata)))
        elif role == "tool":
            call_id = wire["tool_call_id"]
            name = names.get(call_id, "tool")
            pending.append(ToolReturnPart(name, text, tool_call_id=call_id))
        elif role in ("system", "developer"):
            pending.append(SystemPromptPart(text))
        else:
            pending.append(UserPromptPart(text))
    flush()
    return out


def _copy(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if metadata is None else {k: dict(v) for k, v in metadata.items()}


def _joined(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


def _stands_for(message: ModelMessage, session: str) -> int | None:
    """How many entries of ``session`` one of comal's assembly messages stands for."""
    mark = (message.metadata or {}).get(MARK)
    if isinstance(mark, Mapping) and mark.get("session") == session:
        upto = mark.get("upto")
        if isinstance(upto, int) and not isinstance(upto, bool):
            return upto
    return None


class ComalHistory:
    """The ledger, the engine's assembly and its recall tools for a pydantic-ai agent; see the
    module docstring. Arguments are :class:`~comal.integrations.LedgerSession`'s."""

    def __init__(self, ledger: LedgerBackend, **options: Any) -> None:
        self.comal = LedgerSession(ledger, framework="pydantic-ai", **options)
        self.toolset: FunctionToolset[Any] = FunctionToolset(
            [self._tool(t) for t in self.comal.recall_tools()]
        )

    @property
    def session_id(self) -> str:
        return self.comal.session_id

    def capability(self) -> AbstractCapability[Any]:
        """The processor, the reply recording and the toolset as one capability."""
        return _Capability(self)

    def _tool(self, spec: RecallTool) -> Tool[Any]:
        def recall(ctx: RunContext[Any], **arguments: Any) -> str:
            call_id = ctx.tool_call_id or f"comal-{ctx.run_step}"
            return self.comal.recall(spec.name, json.dumps(arguments), call_id)[0]

        return Tool.from_schema(
            recall, spec.name, spec.description, spec.parameters, takes_ctx=True
        )

    # -- the history processor -----------------------------------------------------------------
    def process(
        self, messages: list[ModelMessage], tools: Sequence[Any] | None = None
    ) -> list[ModelMessage]:
        """Record what is new in ``messages``; the assembly to send, with the system prompt
        parts and the latest instructions the agent gave. ``tools``: the request's tool
        definitions, budgeted (a plain processor is not told them: the recall tools are)."""
        with self.comal.lock:
            covered, own = 0, []
            for message in messages:
                upto = _stands_for(message, self.comal.scope.session)
                if upto is None:
                    own.append(message)
                else:
                    covered = max(covered, upto)
            ids = self.comal.sync([(None, m) for m in to_comal(own)], covered=covered)
            whole = covered == 0 and self.comal.mirrors(ids)
            return self._send(messages, tools, whole=whole)

    def _send(
        self, messages: list[ModelMessage], tools: Sequence[Any] | None, *, whole: bool
    ) -> list[ModelMessage]:
        system = [
            p for m in messages if isinstance(m, ModelRequest)
            for p in m.parts if isinstance(p, SystemPromptPart)
        ]  # fmt: skip
        last = next((m for m in reversed(messages) if isinstance(m, ModelRequest)), None)
        instructions = [p.content for p in system]
        if last is not None and last.instructions:
            instructions.append(last.instructions)
        specs = [
            {"name": t.name, "description": t.description, "parameters": t.parameters_json_schema}
            for t in tools
        ] if tools is not None else [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in self.comal.recall_tools()
        ]  # fmt: skip
        assembled = self.comal.prepare(
            system=[Message.system(text) for text in instructions], tools=specs
        )
        if assembled.verbatim and whole:
            # Nothing compacted: the model gets the run's own messages, as they are.
            return messages
        mark = {"session": self.comal.scope.session, "upto": self.comal.held()}
        out = to_pydantic_ai(assembled.messages, mark=mark)
        if system:
            first = out[0] if out and isinstance(out[0], ModelRequest) else None
            if first is None:
                first = ModelRequest(parts=[], metadata={MARK: dict(mark)})
                out.insert(0, first)
            first.parts = [*system, *first.parts]
        if last is not None and out and isinstance(out[-1], ModelRequest):
            out[-1].instructions = last.instructions
        return out

    async def __call__(
        self, ctx: RunContext[Any], messages: list[ModelMessage]
    ) -> list[ModelMessage]:
        # The ledger is synchronous: its work crosses to a thread at this async edge.
        return await asyncio.to_thread(self.process, messages)

    def record_reply(self, response: ModelResponse) -> None:
        """The model's reply, with the request record of the assembly sent for it."""
        (message,) = to_comal([response]) or (None,)
        if message is not None:
            u = response.usage
            usage = Usage(u.input_tokens - u.cache_read_tokens, u.cache_read_tokens,
                          u.cache_write_tokens, u.output_tokens, None)  # fmt: skip
            self.comal.record_reply(message, usage=usage, model=response.model_name)


class _Capability(AbstractCapability[Any]):
    def __init__(self, history: ComalHistory) -> None:
        self.history = history

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        # Only this request is changed: the run's own history stays as the framework built it.
        tools = request_context.model_request_parameters.function_tools
        sent = await asyncio.to_thread(self.history.process, list(request_context.messages), tools)
        request_context.messages = sent
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: Any, response: ModelResponse
    ) -> ModelResponse:
        await asyncio.to_thread(self.history.record_reply, response)
        return response

    def get_toolset(self) -> Any:
        return self.history.toolset

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None
