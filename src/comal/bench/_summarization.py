"""``langchain-summarization``: LangChain v1's ``SummarizationMiddleware`` as a strategy.

The real middleware (``langchain.agents.middleware.SummarizationMiddleware``) runs with its
documented defaults — ``keep=("messages", 20)``, ``trim_tokens_to_summarize=4000``,
``token_counter=count_tokens_approximately``, its default summary prompt and summary message —
and the trigger LangChain's documentation shows, ``("fraction", 0.8)`` of the model's maximum
input (the middleware has no default trigger: without one it never summarizes). The model's
profile gives ``max_input_tokens`` = the budget's input limit, so the fraction is of the window
the bench replays. ``langchain-summarization:trigger=F`` sets the fraction.

The summary is written by a fake, through the middleware's documented ``summarizer=`` seam (a
function given the trimmed messages): the first and last 2,000 characters of their
``get_buffer_string`` text, about a thousand tokens, the size of a model-written summary. What a
summary says does not change the bench's accounting: a summarized output is lost to the agent
(nothing keeps it readable), and the summarizer's own model calls are not priced.

As in an agent built with ``create_agent``, ``before_model`` runs before every model call over
the agent's state, and its update *replaces* the state (``RemoveMessage(REMOVE_ALL_MESSAGES)``,
the summary message, the kept messages): later calls see the summary, not the originals. Kept
messages are mapped back to the original comal messages by ``id``; the summary becomes a user
message with the middleware's text. Needs ``langchain`` (``pip install 'comal[bench]'``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import UserError
from ..messages import Message, Role
from ..tokens import Budget
from ._langchain import to_langchain
from ._strategy_types import Sent, Session

__all__ = ["DEFAULT_TRIGGER", "LangchainSummarization", "fake_summary"]

DEFAULT_TRIGGER = 0.8
_EDGE = 2_000


def _modules() -> tuple[Any, Any, Any, Any]:
    try:
        middleware = importlib.import_module("langchain.agents.middleware")
        messages = importlib.import_module("langchain_core.messages")
        utils = importlib.import_module("langchain_core.messages.utils")
        fakes = importlib.import_module("langchain_core.language_models.fake_chat_models")
    except ImportError as exc:
        raise UserError(
            "langchain-summarization needs langchain >= 1: pip install 'comal[bench]' "
            "(or leave it out of --strategies)"
        ) from exc
    return middleware, messages, utils, fakes


def fake_summary(text: str) -> str:
    """The fake summarizer's summary of a transcript's text: its two ends."""
    if len(text) <= 2 * _EDGE:
        return text
    return f"{text[:_EDGE]}\n[…]\n{text[-_EDGE:]}"


class LangchainSummarization:
    """``SummarizationMiddleware.before_model`` before every call; see the module docstring."""

    keeps_store = False

    def __init__(self, name: str = "langchain-summarization") -> None:
        self.name = name
        head, *items = name.split(":")
        self.trigger = DEFAULT_TRIGGER
        for item in items:
            key, sep, value = item.partition("=")
            try:
                fraction = float(value)
            except ValueError:
                fraction = -1.0
            if key != "trigger" or not sep or not 0 < fraction <= 1:
                raise UserError(f"{name!r}: write {head} or {head}:trigger=<fraction in (0, 1]>")
            self.trigger = fraction
        self._middleware, self._lc, self._utils, self._fakes = _modules()

    def _make(self, budget: Budget) -> Any:
        model = self._fakes.GenericFakeChatModel(
            messages=iter(()), profile={"max_input_tokens": budget.input_limit}
        )

        def summarize(messages: Sequence[Any]) -> str:
            return fake_summary(self._utils.get_buffer_string(list(messages)))

        return self._middleware.SummarizationMiddleware(
            model, trigger=("fraction", self.trigger), summarizer=summarize
        )

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]:
        middleware = self._make(budget)
        messages = [e.message for e in session.entries]
        lead = 0
        while lead < len(messages) and messages[lead].role in (Role.SYSTEM, Role.DEVELOPER):
            lead += 1
        system = tuple(messages[:lead])
        state: list[Any] = []
        fed = lead
        for i in session.turns:
            state += [to_langchain(self._lc, messages[j], str(j)) for j in range(fed, i)]
            fed = max(fed, i)
            update = middleware.before_model({"messages": state}, None)
            if update is not None:
                removal = self._lc.RemoveMessage
                state = [m for m in update["messages"] if not isinstance(m, removal)]
            yield Sent((*system, *(self._back(m, messages) for m in state)))

    def _back(self, kept: Any, messages: list[Message]) -> Message:
        key = str(kept.id)
        if key.isdigit() and int(key) < len(messages):
            return messages[int(key)]
        text = kept.content if isinstance(kept.content, str) else str(kept.content)
        return Message.user(text)
