# covers: TOK-2
"""Measured anchor + estimated delta, and when the anchor stops being valid."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from comal.tokens import Anchor, AnchorKey, Usage, estimate_input, normalize_usage

KEY = AnchorKey(
    model="claude-sonnet-4-5",
    effort="high",
    catalog_digest="tools:ab12",
    config_digest="cfg:cd34",
    checkpoint_id=None,
)


def _anchor(measured: int = 15_553, last_seq: int = 40) -> Anchor:
    anchor = Anchor.from_usage(
        normalize_usage(
            "anthropic",
            {
                "input_tokens": 3,
                "cache_creation_input_tokens": 10816,
                "cache_read_input_tokens": measured - 10819,
                "output_tokens": 10,
            },
        ),
        last_seq=last_seq,
        key=KEY,
    )
    assert anchor is not None
    return anchor


def test_anchor_is_the_provider_measured_prompt() -> None:
    anchor = _anchor()
    assert anchor.measured_input == 15_553
    assert anchor.key == KEY


def test_matching_anchor_adds_only_the_delta() -> None:
    est = estimate_input(_anchor(), current=KEY, delta_tokens=1_200, estimated_total=18_000)
    assert est.tokens == 15_553 + 1_200
    assert est.measured is True
    assert est.marker == "ctx"
    assert "seq 40" in est.basis


def test_no_anchor_is_a_marked_estimate() -> None:
    est = estimate_input(None, current=KEY, delta_tokens=0, estimated_total=18_000)
    assert (est.tokens, est.measured, est.marker) == (18_000, False, "ctx ~")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model", "claude-opus-4-1"),
        ("effort", "low"),
        ("effort", None),
        ("catalog_digest", "tools:ffff"),
        ("config_digest", "cfg:0000"),
        ("checkpoint_id", 7),
    ],
)
def test_any_key_change_invalidates_the_anchor(field: str, value: Any) -> None:
    current = dataclasses.replace(KEY, **{field: value})
    est = estimate_input(_anchor(), current=current, delta_tokens=1_200, estimated_total=18_000)
    assert (est.tokens, est.measured) == (18_000, False)
    assert field in est.basis and "invalid" in est.basis


def test_unknown_usage_gives_no_anchor() -> None:
    # A streaming delta without input counts must not become an anchor of 0 tokens.
    assert Anchor.from_usage(Usage(None, 5, None, 10, None), last_seq=3, key=KEY) is None


def test_openai_anchor_counts_cached_tokens_once() -> None:
    usage = normalize_usage(
        "openai_chat", {"prompt_tokens": 2006, "prompt_tokens_details": {"cached_tokens": 1920}}
    )
    anchor = Anchor.from_usage(usage, last_seq=9, key=KEY)
    assert anchor is not None and anchor.measured_input == 2006


def test_negative_estimates_are_rejected() -> None:
    with pytest.raises(ValueError):
        estimate_input(None, current=KEY, delta_tokens=-1, estimated_total=0)
