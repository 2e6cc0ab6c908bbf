"""Tokens: usage, counting, windows and the budget (SPEC TOK-1..5).

- :func:`normalize_usage` turns a provider's usage report into :class:`Usage`, where an unknown
  count is ``None`` and never 0 (TOK-1).
- :class:`TiktokenCounter` counts exactly with a BPE file read from disk (never the network);
  :class:`EstimatingCounter` estimates per :class:`ContentKind` without one;
  :func:`default_counter` picks the best available; :func:`count_message` prices a message.
- :func:`estimate_input` combines a provider-measured :class:`Anchor` with the estimate of what
  was appended since, as long as the anchor's key still matches (TOK-2).
- :func:`resolve_window` finds the effective window from the model catalog, an explicit override
  and ``COMAL_CONTEXT_WINDOW`` by minimum, or :data:`FALLBACK_WINDOW` (TOK-3).
- :class:`Budget` is the budget algebra, its compaction threshold and the CONTEXT_OVERHEAD check
  (TOK-4, TOK-5).
- :class:`PriceTable` and :func:`price_for` are the providers' prompt-cache prices, as data;
  :func:`saved_vs_uncached` prices a request's measured usage against no caching (CCH-2), and
  :func:`prompt_cost` / :func:`session_cost` what it cost at list prices (unknown when a model
  has no price).

Names load on first use (PEP 562): the ledger needs usage, counting and pricing, and a command
such as ``comal sessions`` should not pay for the window catalog and the budget to list a table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._anchor import Anchor, AnchorKey, InputEstimate, estimate_input
    from ._budget import Budget
    from ._counting import (
        IMAGE_TOKENS,
        IMAGE_TOKENS_LOW_DETAIL,
        MESSAGE_OVERHEAD,
        REPLY_PRIMING,
        TOOL_CALL_OVERHEAD,
        TOOL_RESULT_OVERHEAD,
        TokenCounter,
        count_message,
        count_messages,
        count_part,
        default_counter,
    )
    from ._estimate import ContentKind, EstimatingCounter, classify
    from ._models import (
        CONTEXT_WINDOW_ENV,
        FALLBACK_WINDOW,
        MODELS_FILE_ENV,
        ModelInfo,
        WindowResolution,
        load_catalog,
        lookup_model,
        resolve_window,
        user_models_file,
    )
    from ._pricing import (
        PRICES_FILE_ENV,
        ModelCost,
        PriceTable,
        SessionCost,
        load_price_catalog,
        load_prices,
        price_for,
        prompt_cost,
        recorded_saving,
        saved_vs_uncached,
        session_cost,
    )
    from ._tiktoken import TIKTOKEN_FILE_ENV, TiktokenCounter
    from ._usage import PROTOCOLS, Usage, normalize_usage

_LAZY = {
    "Anchor": "._anchor",
    "AnchorKey": "._anchor",
    "Budget": "._budget",
    "CONTEXT_WINDOW_ENV": "._models",
    "ContentKind": "._estimate",
    "EstimatingCounter": "._estimate",
    "FALLBACK_WINDOW": "._models",
    "IMAGE_TOKENS": "._counting",
    "IMAGE_TOKENS_LOW_DETAIL": "._counting",
    "InputEstimate": "._anchor",
    "MESSAGE_OVERHEAD": "._counting",
    "MODELS_FILE_ENV": "._models",
    "ModelCost": "._pricing",
    "ModelInfo": "._models",
    "PRICES_FILE_ENV": "._pricing",
    "PROTOCOLS": "._usage",
    "PriceTable": "._pricing",
    "REPLY_PRIMING": "._counting",
    "SessionCost": "._pricing",
    "TIKTOKEN_FILE_ENV": "._tiktoken",
    "TOOL_CALL_OVERHEAD": "._counting",
    "TOOL_RESULT_OVERHEAD": "._counting",
    "TiktokenCounter": "._tiktoken",
    "TokenCounter": "._counting",
    "Usage": "._usage",
    "WindowResolution": "._models",
    "classify": "._estimate",
    "count_message": "._counting",
    "count_messages": "._counting",
    "count_part": "._counting",
    "default_counter": "._counting",
    "estimate_input": "._anchor",
    "load_catalog": "._models",
    "load_price_catalog": "._pricing",
    "load_prices": "._pricing",
    "lookup_model": "._models",
    "normalize_usage": "._usage",
    "price_for": "._pricing",
    "prompt_cost": "._pricing",
    "recorded_saving": "._pricing",
    "resolve_window": "._models",
    "saved_vs_uncached": "._pricing",
    "session_cost": "._pricing",
    "user_models_file": "._models",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CONTEXT_WINDOW_ENV",
    "FALLBACK_WINDOW",
    "IMAGE_TOKENS",
    "IMAGE_TOKENS_LOW_DETAIL",
    "MESSAGE_OVERHEAD",
    "MODELS_FILE_ENV",
    "PRICES_FILE_ENV",
    "PROTOCOLS",
    "REPLY_PRIMING",
    "TIKTOKEN_FILE_ENV",
    "TOOL_CALL_OVERHEAD",
    "TOOL_RESULT_OVERHEAD",
    "Anchor",
    "AnchorKey",
    "Budget",
    "ContentKind",
    "EstimatingCounter",
    "InputEstimate",
    "ModelCost",
    "ModelInfo",
    "PriceTable",
    "SessionCost",
    "TiktokenCounter",
    "TokenCounter",
    "Usage",
    "WindowResolution",
    "classify",
    "count_message",
    "count_messages",
    "count_part",
    "default_counter",
    "estimate_input",
    "load_catalog",
    "load_price_catalog",
    "load_prices",
    "lookup_model",
    "normalize_usage",
    "price_for",
    "prompt_cost",
    "recorded_saving",
    "resolve_window",
    "saved_vs_uncached",
    "session_cost",
    "user_models_file",
]
