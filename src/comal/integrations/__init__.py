"""comal inside the Python agent frameworks: LangChain v1, pydantic-ai and the OpenAI Agents SDK.

Each adapter is a thin layer over :class:`LedgerSession` (the turn service, the ledger, the
house and the engine's recall tools) and imports its framework only when it is used, so
``import comal`` never pays for one:

- :class:`ComalMiddleware` (``comal[langchain]``): middleware for ``create_agent``;
- :class:`ComalHistory` (``comal[pydantic-ai]``): a history processor, a toolset and a
  capability for ``pydantic_ai.Agent``;
- :class:`ComalSession` (``comal[openai-agents]``): a ``Session`` for the Agents SDK's Runner.

A missing framework is :class:`IntegrationUnavailable` (``INTEGRATION_UNAVAILABLE``) naming the
extra to install.
"""

from typing import TYPE_CHECKING, Any

from ._core import (
    BRANCH_EVENT,
    KEYS_EVENT,
    Assembled,
    IntegrationInput,
    IntegrationUnavailable,
    LedgerSession,
    RecallTool,
)

if TYPE_CHECKING:
    from ._langchain import ComalMiddleware
    from ._openai_agents import ComalSession
    from ._pydantic_ai import ComalHistory

_LAZY = {
    "ComalMiddleware": "._langchain",
    "ComalHistory": "._pydantic_ai",
    "ComalSession": "._openai_agents",
}


def __getattr__(name: str) -> Any:
    # The frameworks take seconds to import; only the adapter that is used pays for its own.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)


__all__ = [
    "BRANCH_EVENT",
    "KEYS_EVENT",
    "Assembled",
    "ComalHistory",
    "ComalMiddleware",
    "ComalSession",
    "IntegrationInput",
    "IntegrationUnavailable",
    "LedgerSession",
    "RecallTool",
]
