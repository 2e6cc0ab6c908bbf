"""comal inside the OpenAI Agents SDK: a ``Session`` backed by the ledger.

::

    from comal.integrations import ComalSession
    comal = ComalSession(ledger, window=128_000)                 # session=... resumes
    agent = Agent(name="coder", instructions=..., tools=[*my_tools, *comal.tools])
    result = await Runner.run(agent, "fix the parser", session=comal, run_config=comal.run_config())

**The Session protocol, as the SDK's own sessions keep it.** ``get_items`` gives back exactly
the items ``add_items`` was given — the same JSON, ``id``, ``status`` and string ``content``
included — the latest ``limit`` of them when asked (``session_settings.limit`` by default),
orphans and all: the SDK drops those itself. Each ``add_items`` is one ledger transaction:
the items' canonical messages as entries (what the engine assembles, ``comal show`` prints and
the recall tools search) and the items' JSON text, byte for byte, in an ``agents_items`` event.
``pop_item`` returns the newest item (``None`` on an empty session) and ``clear_session``
empties it; the ledger stays append-only (LED-1): each is an ``agents_pop`` / ``agents_clear``
event holding what it removed, the items the session gives back honour it at once, and before
anything is added or assembled again the session continues in a branch that holds the items
left (:meth:`LedgerSession.branch`), so a popped item is no longer sent and a cleared session
starts empty. Every byte stays in the old ledger session.

**What the model sees.** ``run_config()``'s ``call_model_input_filter`` assembles the ledger
session before every model call of a run (the Runner has saved every earlier item by then),
budgeting the agent's instructions and tool schemas under ``window``. While the engine sends
every entry unchanged, the filter sends the Runner's own input — the exact items, as a
``session_settings.limit`` or a ``session_input_callback`` shaped them; once it compacts, the
engine's assembly goes instead (references, summaries and checkpoints rendered as text; items
in comal's Responses form), and a limit or callback no longer shapes what is sent. Without the
filter the Runner sends ``get_items`` as it is and nothing is compacted. ``comal.tools`` are
the engine's recall tools, run through comal's house.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..ledger import LedgerBackend, Record
from ..messages import Message
from ..messages.wire import from_openai_responses, to_openai_responses
from ._core import IntegrationInput, LedgerSession, RecallTool, require

require("agents", "openai-agents")

from agents import FunctionTool, RunConfig  # noqa: E402
from agents.memory.session_settings import (  # noqa: E402
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)
from agents.run_config import CallModelData, ModelInputData  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

__all__ = ["CLEAR_EVENT", "ITEMS_EVENT", "POP_EVENT", "ComalSession"]

ITEMS_EVENT = "agents_items"  # {"v": 1, "items": [the JSON text of each item added]}
POP_EVENT = "agents_pop"  # {"v": 1, "item": the JSON text of the item popped}
CLEAR_EVENT = "agents_clear"  # {"v": 1, "items": how many items the clear removed}
_KINDS = (ITEMS_EVENT, POP_EVENT, CLEAR_EVENT)
T = TypeVar("T")


def _text(item: Any) -> str:
    try:
        return json.dumps(item, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise IntegrationInput(
            f"an item the Runner added is not JSON ({exc}); a session stores input items "
            "as JSON: give dicts of JSON values"
        ) from exc


async def _settled(work: Callable[[], T]) -> T:
    """``work`` in a worker thread, its outcome known before the caller returns: a cancellation
    that comes while the ledger writes is raised once the write has committed or failed, so the
    Runner never retries a write that happened (the SDK's own sessions do the same)."""
    running = asyncio.ensure_future(asyncio.to_thread(work))
    interrupted: asyncio.CancelledError | None = None
    while not running.done():
        try:
            await asyncio.wait({running})
        except asyncio.CancelledError as exc:
            interrupted = interrupted or exc
    if interrupted is not None:
        if not running.cancelled():
            running.exception()  # retrieved: the cancellation is what the caller hears
        raise interrupted
    return running.result()


def _fold(records: Sequence[Record]) -> tuple[list[str], str | None]:
    """The items a session holds, and why it left its entries behind (popped, cleared)."""
    items: list[str] = []
    left: str | None = None
    for record in records:
        if record.kind == ITEMS_EVENT:
            items.extend(str(t) for t in record.body.get("items", ()))
        elif record.kind == POP_EVENT and items:
            items.pop()
            left = left or "popped"
        elif record.kind == CLEAR_EVENT:
            items.clear()
            left = "cleared"
    return items, left


class ComalSession:
    """A ledger session as the Agents SDK's ``Session``; see the module docstring.
    ``session_settings`` is the SDK's (a ``SessionSettings`` or its dict); the other arguments
    are :class:`~comal.integrations.LedgerSession`'s."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        ledger: LedgerBackend,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self.session_settings = (
            SessionSettings() if session_settings is None
            else coerce_session_settings(session_settings)
        )  # fmt: skip
        self.comal = LedgerSession(ledger, framework="openai-agents", **options)
        self.session_id = self.comal.session_id
        self.tools: list[FunctionTool] = [self._tool(t) for t in self.comal.recall_tools()]
        # What the last model call budgeted beside the history: until the filter has seen a
        # call, an assembly budgets the recall tools only.
        self._system: list[Message] = []
        self._specs: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in self.comal.recall_tools()
        ]
        self._adopt()

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

    # -- the items -----------------------------------------------------------------------------
    def _records(self) -> list[Record]:
        return self.comal.ledger.records(self.comal.scope, "event", kinds=_KINDS)

    def _turn(self) -> None:
        # Writers of one session take turns for the rest of the transaction (both backends).
        self.comal.ledger.exclusive(f"agents-items\x00{self.comal.scope.session}")

    def _adopt(self) -> None:
        # A session written before its items were kept gives back its entries in comal's
        # Responses form rather than nothing.
        with self.comal.lock, self.comal.ledger.atomic():
            self._turn()
            if self._records() or not self.comal.held():
                return
            items = to_openai_responses([e.message for e in self.comal.entries()])
            body = {"v": 1, "items": [_text(i) for i in items], "adopted": True}
            self.comal.ledger.add_record(self.comal.scope, "event", ITEMS_EVENT, body)

    def _settle(self) -> None:
        """After a pop or a clear, continue in a branch that holds the items left."""
        items, left = _fold(self._records())
        if left is None:
            return
        messages = from_openai_responses([json.loads(t) for t in items])
        seed = {"v": 1, "items": items}

        def beside() -> None:
            self.comal.ledger.add_record(self.comal.scope, "event", ITEMS_EVENT, seed)

        at = self.comal.agreed(messages)
        self.comal.branch([(None, m) for m in messages], at=at, reason=left, beside=beside)

    def _read(self, limit: int | None) -> list[Any]:
        items, _ = _fold(self._records())
        if limit is not None and limit >= 0:
            items = items[-limit:] if limit else []
        return [json.loads(t) for t in items]

    def _add(self, items: list[Any]) -> None:
        texts = [_text(i) for i in items]
        messages = from_openai_responses([json.loads(t) for t in texts])
        with self.comal.lock, self.comal.ledger.atomic():
            self._turn()
            self._settle()
            self.comal.record([(None, m) for m in messages], once=True)
            body = {"v": 1, "items": texts}
            self.comal.ledger.add_record(self.comal.scope, "event", ITEMS_EVENT, body)

    def _pop(self) -> Any:
        with self.comal.lock, self.comal.ledger.atomic():
            self._turn()
            items, _ = _fold(self._records())
            if not items:
                return None
            body = {"v": 1, "item": items[-1]}
            self.comal.ledger.add_record(self.comal.scope, "event", POP_EVENT, body)
            return json.loads(items[-1])

    def _clear(self) -> None:
        with self.comal.lock, self.comal.ledger.atomic():
            self._turn()
            items, _ = _fold(self._records())
            if items:
                body = {"v": 1, "items": len(items)}
                self.comal.ledger.add_record(self.comal.scope, "event", CLEAR_EVENT, body)

    # -- the Session protocol ------------------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The latest ``limit`` items (``session_settings.limit`` when ``None``; all when
        that is ``None`` too), oldest first, exactly as they were added."""
        wanted = resolve_session_limit(limit, self.session_settings)
        return await asyncio.to_thread(self._read, wanted)

    async def add_items(self, items: list[Any]) -> None:
        if items:
            given = list(items)
            await _settled(lambda: self._add(given))

    async def pop_item(self) -> Any:
        """Remove the newest item and return it; ``None`` when the session is empty."""
        return await _settled(self._pop)

    async def clear_session(self) -> None:
        await _settled(self._clear)

    def close(self) -> None:
        """Wait for the engine's deferred maintenance; the ledger stays open (it is the
        caller's)."""
        self.comal.service.drain()

    # -- per model call ------------------------------------------------------------------------
    def _filter(self, data: CallModelData[Any]) -> ModelInputData:
        instructions = data.model_data.instructions
        self._system = [Message.system(instructions)] if instructions else []
        self._specs = [
            {"name": t.name, "description": t.description, "parameters": t.params_json_schema}
            for t in data.agent.tools
            if isinstance(t, FunctionTool)
        ]
        with self.comal.lock:
            with self.comal.ledger.atomic():
                self._turn()
                self._settle()
            assembled = self.comal.prepare(system=self._system, tools=self._specs)
        if assembled.verbatim:
            # Nothing compacted: the model gets the Runner's own input, item for item.
            return ModelInputData(input=list(data.model_data.input), instructions=instructions)
        sent = list(to_openai_responses(list(assembled.messages)))
        return ModelInputData(input=sent, instructions=instructions)  # type: ignore[arg-type]

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the assembly again before every model call
        (the Runner has saved every earlier item of the run by then)."""
        return await asyncio.to_thread(self._filter, data)

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`call_model_input_filter` (``options``: its other
        fields)."""
        return RunConfig(call_model_input_filter=self.call_model_input_filter, **options)
