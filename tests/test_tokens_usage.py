# covers: TOK-1
"""Usage normalization per provider protocol, with usage objects shaped as providers send them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from comal.errors import InputError
from comal.tokens import PROTOCOLS, Usage, normalize_usage

# From a Claude Code session in the shared corpus (claude-code/ccviewer_1af7fc5e-...jsonl).
ANTHROPIC = {
    "input_tokens": 3,
    "cache_creation_input_tokens": 10816,
    "cache_read_input_tokens": 4734,
    "cache_creation": {"ephemeral_5m_input_tokens": 10816, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 161,
    "service_tier": "standard",
}

# From a mini-swe-agent deepseek-reasoner run in the shared corpus.
DEEPSEEK = {
    "completion_tokens": 90,
    "prompt_tokens": 1742,
    "total_tokens": 1832,
    "completion_tokens_details": {"reasoning_tokens": 31},
    "prompt_tokens_details": {"cached_tokens": 1728},
    "prompt_cache_hit_tokens": 1728,
    "prompt_cache_miss_tokens": 14,
}

OPENAI_CHAT = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
    "completion_tokens_details": {
        "reasoning_tokens": 192,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}

OPENAI_RESPONSES = {
    "input_tokens": 36,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 87,
    "output_tokens_details": {"reasoning_tokens": 64},
    "total_tokens": 123,
}

# From the Codex CLI rollout in the shared corpus (event_msg token_count).
CODEX_LAST = {
    "input_tokens": 25918,
    "cached_input_tokens": 25472,
    "output_tokens": 944,
    "reasoning_output_tokens": 896,
    "total_tokens": 26862,
}

GEMINI = {
    "promptTokenCount": 12000,
    "cachedContentTokenCount": 8000,
    "candidatesTokenCount": 400,
    "thoughtsTokenCount": 250,
    "totalTokenCount": 12650,
}


def test_anthropic_input_tokens_are_new_input_only() -> None:
    u = normalize_usage("anthropic", ANTHROPIC)
    assert u == Usage(new_input=3, cache_read=4734, cache_write=10816, output=161, reasoning=None)
    assert u.input_total == 3 + 4734 + 10816


def test_anthropic_missing_cache_fields_are_unknown_not_zero() -> None:
    u = normalize_usage("anthropic", {"input_tokens": 10, "output_tokens": 5})
    assert u.cache_read is None and u.cache_write is None
    assert u.input_total == 10


def test_anthropic_cache_write_from_ttl_split_when_total_is_absent() -> None:
    raw = {
        "input_tokens": 1,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 20},
        "output_tokens": 2,
    }
    assert normalize_usage("anthropic", raw).cache_write == 120


def test_anthropic_streaming_delta_has_only_output() -> None:
    u = normalize_usage("anthropic", {"output_tokens": 15})
    assert u == Usage(None, None, None, 15, None)
    assert u.input_total is None


def test_whole_response_with_usage_key_is_accepted() -> None:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "usage": ANTHROPIC}
    assert normalize_usage("anthropic", message) == normalize_usage("anthropic", ANTHROPIC)


def test_openai_chat_prompt_includes_cached_and_output_includes_reasoning() -> None:
    u = normalize_usage("openai_chat", OPENAI_CHAT)
    assert u == Usage(new_input=86, cache_read=1920, cache_write=None, output=300, reasoning=192)
    assert u.input_total == 2006


def test_openai_chat_deepseek_hit_and_miss_are_used() -> None:
    u = normalize_usage("openai_chat", DEEPSEEK)
    assert u == Usage(new_input=14, cache_read=1728, cache_write=None, output=90, reasoning=31)


def test_openai_chat_without_details_keeps_total_and_unknown_split() -> None:
    # OpenAI-compatible servers (vLLM, Ollama) often send only the three totals.
    u = normalize_usage("openai_chat", {"prompt_tokens": 50, "completion_tokens": 7})
    assert u.new_input == 50
    assert u.cache_read is None and u.reasoning is None and u.cache_write is None
    assert u.input_total == 50


def test_openai_chat_observed_zero_cache_is_zero() -> None:
    raw = {
        "prompt_tokens": 50,
        "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert normalize_usage("openai_chat", raw).cache_read == 0


def test_openai_responses() -> None:
    u = normalize_usage("openai_responses", OPENAI_RESPONSES)
    assert u == Usage(new_input=36, cache_read=0, cache_write=None, output=87, reasoning=64)


def test_codex_last_token_usage_and_its_wrappers() -> None:
    expected = Usage(new_input=446, cache_read=25472, cache_write=None, output=944, reasoning=896)
    assert normalize_usage("openai_responses", CODEX_LAST) == expected
    info = {
        "total_token_usage": {**CODEX_LAST, "input_tokens": 10**6},
        "last_token_usage": CODEX_LAST,
    }
    assert normalize_usage("openai_responses", info) == expected
    event = {"type": "token_count", "info": info, "rate_limits": {}}
    assert normalize_usage("openai_responses", event) == expected


def test_codex_null_info_is_all_unknown() -> None:
    u = normalize_usage("openai_responses", {"type": "token_count", "info": None})
    assert u == Usage(None, None, None, None, None)


def test_gemini_output_adds_thoughts_and_input_excludes_cache() -> None:
    u = normalize_usage("gemini", GEMINI)
    assert u == Usage(new_input=4000, cache_read=8000, cache_write=None, output=650, reasoning=250)
    assert u.input_total == 12000


def test_gemini_snake_case_and_wrapper() -> None:
    snake = {
        "prompt_token_count": 12000,
        "cached_content_token_count": 8000,
        "candidates_token_count": 400,
        "thoughts_token_count": 250,
    }
    assert normalize_usage("gemini", snake) == normalize_usage("gemini", GEMINI)
    assert normalize_usage("gemini", {"usageMetadata": GEMINI}) == normalize_usage("gemini", GEMINI)


def test_gemini_omitted_zero_counts_are_observed_zeros() -> None:
    # proto3 JSON drops zero fields; with the prompt count present the others were zero.
    u = normalize_usage("gemini", {"promptTokenCount": 10, "candidatesTokenCount": 3})
    assert u == Usage(new_input=10, cache_read=0, cache_write=None, output=3, reasoning=0)


def test_gemini_tool_use_prompt_counts_as_input() -> None:
    u = normalize_usage("gemini", {**GEMINI, "toolUsePromptTokenCount": 100})
    assert u.new_input == 4100


def test_empty_report_is_unknown_everywhere() -> None:
    for protocol in PROTOCOLS:
        assert normalize_usage(protocol, {}) == Usage(None, None, None, None, None)


def test_unknown_protocol_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown usage protocol 'bedrock'"):
        normalize_usage("bedrock", ANTHROPIC)


@pytest.mark.parametrize(
    "raw",
    [
        {"input_tokens": -1},
        {"input_tokens": True},
        {"input_tokens": "12"},
        {"input_tokens": 1.5},
    ],
)
def test_malformed_counts_name_the_field(raw: dict[str, Any]) -> None:
    with pytest.raises(InputError) as err:
        normalize_usage("anthropic", raw)
    assert err.value.field == "input_tokens"


def test_cached_larger_than_prompt_is_rejected() -> None:
    raw = {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}}
    with pytest.raises(InputError, match="exceed"):
        normalize_usage("openai_chat", raw)


def test_integral_floats_are_accepted() -> None:
    assert normalize_usage("anthropic", {"input_tokens": 12.0}).new_input == 12


counts = st.one_of(st.none(), st.integers(min_value=0, max_value=10**9))


@given(counts, counts, counts, counts, counts)
def test_to_dict_round_trips(
    a: int | None, b: int | None, c: int | None, d: int | None, e: int | None
) -> None:
    u = Usage(a, b, c, d, e)
    assert Usage.from_dict(u.to_dict()) == u
    assert set(u.to_dict()) == {"new_input", "cache_read", "cache_write", "output", "reasoning"}


@given(counts, counts, counts)
def test_input_total_is_none_exactly_when_new_input_is_unknown(
    new: int | None, read: int | None, write: int | None
) -> None:
    total = Usage(new, read, write, None, None).input_total
    assert (total is None) == (new is None)
    if new is not None:
        assert total == new + (read or 0) + (write or 0)


def test_from_dict_rejects_unknown_keys_and_bad_values() -> None:
    with pytest.raises(InputError, match="unknown usage keys"):
        Usage.from_dict({"new_input": 1, "prompt_tokens": 2})
    with pytest.raises(InputError):
        Usage.from_dict({"new_input": -3})
    assert Usage.from_dict({}) == Usage(None, None, None, None, None)


def test_usage_rejects_negative_values() -> None:
    with pytest.raises(ValueError):
        Usage(-1, None, None, None, None)


def test_responses_cache_writes_are_counted_when_reported() -> None:
    # covers: TOK-1
    u = normalize_usage(
        "openai_responses",
        {
            "input_tokens": 1000,
            "input_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 300},
            "output_tokens": 50,
            "output_tokens_details": {"reasoning_tokens": 10},
        },
    )
    assert (u.new_input, u.cache_read, u.cache_write, u.output, u.reasoning) == (
        100,
        600,
        300,
        50,
        10,
    )
    assert u.input_total == 1000
