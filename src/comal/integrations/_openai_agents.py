"""comal inside the OpenAI Agents SDK: a ``Session`` backed by the ledger.

::

    from comal.integrations import ComalSession
    comal = ComalSession(ledger, window=128_000)                 # session=... resumes
    agent = Agent(name="coder", instructions=..., tools=[*my_tools, *comal.tools])
    result = await Runner.run(agent, "fix the parser", session=comal, run_config=comal.run_config())

The Runner reads the session's items at the start of a run, and what ``get_items`` returns is
the engine's assembly of the ledger session (Responses input items: references, summaries and
checkpoints rendered as text), not a stored list. The Runner saves each turn's items before the
next model call (``add_items``), so ``run_config()``'s ``call_model_input_filter`` can assemble
again before every model call of a run, budgeting the agent's instructions and tool schemas.
``comal.tools`` are the engine's recall tools, run through comal's house.

The ledger is append-only (LED-1): ``pop_item`` and ``clear_session`` are refused with a coded
error, so the SDK's retry rewind (which pops what it saved) is skipped with the SDK's warning
and a retried input stays recorded twice. Items cross through comal's Responses converter:
an item's ``id`` and ``status`` are not kept.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..ledger import LedgerBackend
from ..messages import Message
from ..messages.wire import from_openai_responses, to_openai_responses
from ._core import IntegrationInput, LedgerSession, RecallTool, require

require("agents", "openai-agents")

from agents import FunctionTool, RunConfig  # noqa: E402
from agents.run_config import CallModelData, ModelInputData  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

__all__ = ["ComalSession"]


def _item_type(item: Any) -> str:
    return str(item.get("type") or item.get("role") or "") if isinstance(item, dict) else ""


class ComalSession:
    """A ledger session as the Agents SDK's ``Session``; see the module docstring. Arguments
    are :class:`~comal.integrations.LedgerSession`'s."""

    session_settings: Any = None

    def __init__(self, ledger: LedgerBackend, **options: Any) -> None:
        self.comal = LedgerSession(ledger, framework="openai-agents", **options)
        self.session_id = self.comal.session_id
        self.tools: list[FunctionTool] = [self._tool(t) for t in self.comal.recall_tools()]
        # What the last model call budgeted beside the history: until the filter has seen a
        # call, get_items budgets the recall tools only.
        self._system: list[Message] = []
        self._specs: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in self.comal.recall_tools()
        ]

    def _tool(self, spec: RecallTool) -> FunctionTool:
        async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
            run = self.comal.recall
            text, _ = await asyncio.to_thread(run, spec.name, arguments, ctx.tool_call_id)
            return text

        return FunctionTool(
            name=spec.name,
            description=spec.description,
            params_json_schema=spec.parameters,
            on_invoke_tool=invoke,
            strict_json_schema=False,  # comal's schemas have optional fields with defaults
        )

    # -- the Session protocol ------------------------------------------------------------------
    def _items(self) -> list[Any]:
        assembled = self.comal.assemble(system=self._system, tools=self._specs)
        return list(to_openai_responses(list(assembled.messages)))

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items = await asyncio.to_thread(self._items)
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
            # A tail must not begin with an output whose call was cut off.
            while items and _item_type(items[0]) == "function_call_output":
                items.pop(0)
        return items

    def _add(self, items: list[Any]) -> None:
        if items:
            self.comal.record([(None, m) for m in from_openai_responses(items)])

    async def add_items(self, items: list[Any]) -> None:
        await asyncio.to_thread(self._add, [dict(i) if isinstance(i, dict) else i for i in items])

    async def pop_item(self) -> Any:
        raise IntegrationInput(
            "the ledger is append-only (LED-1): comal sessions never remove an item; "
            "start a new session instead"
        )

    async def clear_session(self) -> None:
        raise IntegrationInput(
            "the ledger is append-only (LED-1): a comal session cannot be cleared; start a new "
            "session (ComalSession without session=) instead"
        )

    # -- per model call ------------------------------------------------------------------------
    def _filter(self, data: CallModelData[Any]) -> ModelInputData:
        instructions = data.model_data.instructions
        self._system = [Message.system(instructions)] if instructions else []
        self._specs = [
            {"name": t.name, "description": t.description, "parameters": t.params_json_schema}
            for t in data.agent.tools
            if isinstance(t, FunctionTool)
        ]
        return ModelInputData(input=self._items(), instructions=instructions)

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the assembly again before every model call
        (the Runner has saved every earlier item of the run by then)."""
        return await asyncio.to_thread(self._filter, data)

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`call_model_input_filter` (``options``: its other
        fields)."""
        return RunConfig(call_model_input_filter=self.call_model_input_filter, **options)
