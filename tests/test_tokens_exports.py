"""The public API of comal.tokens is exactly what __all__ says (others code against it)."""

from __future__ import annotations

import comal.tokens

EXPECTED = {
    # TOK-1
    "PROTOCOLS",
    "Usage",
    "normalize_usage",
    # counting
    "TokenCounter",
    "TiktokenCounter",
    "TIKTOKEN_FILE_ENV",
    "EstimatingCounter",
    "ContentKind",
    "classify",
    "count_part",
    "count_message",
    "count_messages",
    "default_counter",
    "MESSAGE_OVERHEAD",
    "REPLY_PRIMING",
    "TOOL_CALL_OVERHEAD",
    "TOOL_RESULT_OVERHEAD",
    "IMAGE_TOKENS",
    "IMAGE_TOKENS_LOW_DETAIL",
    # TOK-2
    "Anchor",
    "AnchorKey",
    "InputEstimate",
    "estimate_input",
    # TOK-3
    "FALLBACK_WINDOW",
    "CONTEXT_WINDOW_ENV",
    "MODELS_FILE_ENV",
    "ModelInfo",
    "WindowResolution",
    "load_catalog",
    "lookup_model",
    "resolve_window",
    "user_models_file",
    # TOK-4, TOK-5
    "Budget",
    # CCH-2
    "PRICES_FILE_ENV",
    "PriceTable",
    "load_price_catalog",
    "load_prices",
    "price_for",
    "saved_vs_uncached",
    "recorded_saving",
    "prompt_cost",
    "session_cost",
    "SessionCost",
    "ModelCost",
}


def test_exported_members() -> None:
    assert set(comal.tokens.__all__) == EXPECTED
    for name in EXPECTED:
        assert hasattr(comal.tokens, name), name
    public = {n for n in vars(comal.tokens) if not n.startswith("_")}
    # The lazy loader's own machinery (PEP 562) is not API.
    assert public - {"annotations", "lazy_exports", "TYPE_CHECKING"} <= EXPECTED
