"""``langchain-trim``: the real ``langchain_core.messages.trim_messages`` as a strategy.

Settings: ``strategy="last"``, ``start_on="human"``, ``include_system=True``, whole messages only
(``allow_partial=False``), ``max_tokens`` = the budget's input limit less the reply priming, and
``token_counter`` = comal's :func:`~comal.tokens.count_message` with the bench's counter, so the
trimmer and the report agree on every size. ``start_on="human"`` is how LangChain keeps tool
pairs whole: the kept tail must begin at a human message, so it never begins with a tool result
whose call was cut.

Messages go to LangChain as System/Human/AI(+tool_calls)/Tool messages, each with ``id`` set to
its index; what ``trim_messages`` keeps is mapped back to the original comal messages by that
id, so nothing is lost or rewritten in the round trip. langchain-core is an optional extra
(``pip install 'comal[bench]'``); it is imported by name so the rest of comal (and mypy) does
not need it.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

from ..errors import UserError
from ..messages import Message, Role, Text
from ..tokens import REPLY_PRIMING, Budget, TokenCounter, count_message
from ._strategy_types import Sent, Session

__all__ = ["LangchainTrim", "langchain_available", "to_langchain"]

_MODULE = "langchain_core.messages"


def _module() -> ModuleType:
    try:
        return importlib.import_module(_MODULE)
    except ImportError as exc:
        raise UserError(
            "langchain-trim needs langchain-core: pip install 'comal[bench]' "
            "(or leave langchain-trim out of --strategies)"
        ) from exc


def langchain_available() -> bool:
    try:
        importlib.import_module(_MODULE)
    except ImportError:
        return False
    return True


def _arguments(text: str) -> dict[str, Any]:
    # AIMessage.tool_calls wants an object; raw or invalid arguments travel wrapped, as comal's
    # Anthropic adapter sends them. Only the shape matters here: the original comes back by id.
    try:
        value = json.loads(text)
    except ValueError:
        return {"_raw_arguments": text}
    return value if isinstance(value, dict) else {"_raw_arguments": text}


def to_langchain(lc: ModuleType, message: Message, key: str) -> Any:
    """One comal message as a LangChain message whose ``id`` is ``key``."""
    text = message.text if message.role is not Role.ASSISTANT else _assistant_text(message)
    if message.role in (Role.SYSTEM, Role.DEVELOPER):
        return lc.SystemMessage(content=text, id=key)
    if message.role is Role.USER:
        return lc.HumanMessage(content=text, id=key)
    if message.role is Role.TOOL:
        result = message.tool_result
        assert result is not None
        return lc.ToolMessage(content=result.text, tool_call_id=result.call_id, id=key)
    calls = [
        {"name": c.name, "args": _arguments(c.arguments), "id": c.id, "type": "tool_call"}
        for c in message.tool_calls
    ]
    return lc.AIMessage(content=text, tool_calls=calls, id=key)


def _assistant_text(message: Message) -> str:
    # Message.text also lists tool calls; LangChain carries those in tool_calls instead.
    return "\n".join(p.text for p in message.parts if isinstance(p, Text))


class LangchainTrim:
    """``trim_messages`` over the history before each call; see the module docstring."""

    name = "langchain-trim"
    keeps_store = False

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._lc = _module()
        self._warm_up()

    def _warm_up(self) -> None:
        # LangChain builds its pydantic validators and imports helpers on first use (~16 MB);
        # doing that here keeps a one-time import cost out of the first run's memory and time.
        lc = self._lc
        call = {"name": "t", "args": {}, "id": "w", "type": "tool_call"}
        batch = [
            lc.SystemMessage(content="s", id="0"),
            lc.HumanMessage(content="h", id="1"),
            lc.AIMessage(content="", tool_calls=[call], id="2"),
            lc.ToolMessage(content="r", tool_call_id="w", id="3"),
        ]
        lc.trim_messages(
            batch,
            max_tokens=2,
            token_counter=len,
            strategy="last",
            start_on="human",
            include_system=True,
        )

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]:
        lc = self._lc
        messages = [e.message for e in session.entries]
        converted: list[Any] = []
        tokens: dict[str, int] = {}

        def count(batch: Sequence[Any]) -> int:
            return sum(tokens[m.id] for m in batch)

        limit = budget.input_limit - REPLY_PRIMING
        for i in session.turns:
            # Convert as the agent would: each message once, when it is appended.
            for j in range(len(converted), i):
                key = str(j)
                converted.append(to_langchain(lc, messages[j], key))
                tokens[key] = count_message(self.counter, messages[j])
            kept = lc.trim_messages(
                converted[:i],
                max_tokens=limit,
                token_counter=count,
                strategy="last",
                start_on="human",
                include_system=True,
                allow_partial=False,
            )
            yield Sent(tuple(messages[int(m.id)] for m in kept))
