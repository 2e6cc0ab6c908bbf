"""``langchain-context-editing``: LangChain v1's ``ContextEditingMiddleware`` as a strategy.

The real middleware (``langchain.agents.middleware.ContextEditingMiddleware``) runs with its
documented defaults: one ``ClearToolUsesEdit()`` (``trigger=100_000`` tokens, ``keep=3``,
``clear_at_least=0``, ``clear_tool_inputs=False``, no excluded tools, placeholder
``"[cleared]"``) and ``token_count_method="approximate"`` (LangChain's own
``count_tokens_approximately``). Before each model call of the original run the history goes
through ``wrap_model_call`` exactly as an agent built with ``create_agent`` would call it; the
handler records the edited request instead of calling a model (the request carries a real
``GenericFakeChatModel`` that is never invoked). Like the agent's state, the history handed to
the middleware is the original one every time: its edits apply to the request, not the store.

``langchain-context-editing:trigger=N`` sets the edit's trigger (``trigger=window``: the
budget's input limit, a bench adaptation so the edit can act on windows under 100k). What the
middleware keeps is mapped back to the original comal messages by ``id``; a cleared result
becomes a tool message whose text is the placeholder, its call id kept (pairs stay whole).
Needs the ``langchain`` package (``pip install 'comal[bench]'``), imported by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from ..errors import UserError
from ..messages import Message, Role, ToolResult
from ..tokens import REPLY_PRIMING, Budget
from ._langchain import to_langchain
from ._strategy_types import Sent, Session

__all__ = ["ContextEditing", "context_editing_available"]

_MIDDLEWARE = "langchain.agents.middleware"
_TYPES = "langchain.agents.middleware.types"


def _modules() -> tuple[Any, Any, Any, Any]:
    try:
        middleware = importlib.import_module(_MIDDLEWARE)
        types = importlib.import_module(_TYPES)
        messages = importlib.import_module("langchain_core.messages")
        fakes = importlib.import_module("langchain_core.language_models.fake_chat_models")
    except ImportError as exc:
        raise UserError(
            "langchain-context-editing needs langchain >= 1: pip install 'comal[bench]' "
            "(or leave it out of --strategies)"
        ) from exc
    return middleware, types, messages, fakes


def context_editing_available() -> bool:
    try:
        importlib.import_module(_MIDDLEWARE)
    except ImportError:
        return False
    return True


class ContextEditing:
    """``ContextEditingMiddleware`` before every call; see the module docstring."""

    keeps_store = False

    def __init__(self, name: str = "langchain-context-editing") -> None:
        self.name = name
        head, *items = name.split(":")
        self.trigger: int | str | None = None
        for item in items:
            key, sep, value = item.partition("=")
            if key != "trigger" or not sep or not (value == "window" or value.isdigit()):
                raise UserError(f"{name!r}: write {head} or {head}:trigger=<tokens|window>")
            self.trigger = value if value == "window" else int(value)
        self._middleware, self._types, self._lc, self._fakes = _modules()

    def _make(self, budget: Budget) -> Any:
        mw = self._middleware
        if self.trigger is None:
            return mw.ContextEditingMiddleware()  # the documented defaults
        trigger = budget.input_limit - REPLY_PRIMING if self.trigger == "window" else self.trigger
        return mw.ContextEditingMiddleware(edits=[mw.ClearToolUsesEdit(trigger=trigger)])

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]:
        lc = self._lc
        middleware = self._make(budget)
        model = self._fakes.GenericFakeChatModel(messages=iter(()))
        messages = [e.message for e in session.entries]
        lead = 0
        while lead < len(messages) and messages[lead].role in (Role.SYSTEM, Role.DEVELOPER):
            lead += 1
        system = tuple(messages[:lead])
        system_message = (
            lc.SystemMessage(content="\n".join(m.text for m in system)) if system else None
        )
        converted: list[Any] = []
        for i in session.turns:
            for j in range(lead + len(converted), i):
                converted.append(to_langchain(lc, messages[j], str(j)))
            request = self._types.ModelRequest(
                model=model, messages=list(converted[: i - lead]), system_message=system_message
            )
            seen: list[list[Any]] = []

            def handler(req: Any, seen: list[list[Any]] = seen) -> Any:
                seen.append(list(req.messages))
                return self._types.ModelResponse(result=[lc.AIMessage(content="")])

            middleware.wrap_model_call(request, handler)
            yield Sent((*system, *(self._back(m, messages) for m in seen[0])))

    def _back(self, edited: Any, messages: list[Message]) -> Message:
        original = messages[int(edited.id)]
        cleared = (edited.response_metadata or {}).get("context_editing", {}).get("cleared")
        result = original.tool_result
        if not cleared or result is None:
            return original
        text = edited.content if isinstance(edited.content, str) else str(edited.content)
        part = ToolResult(result.call_id, text, result.is_error, result.name)
        return Message(Role.TOOL, (part,), original.name)
