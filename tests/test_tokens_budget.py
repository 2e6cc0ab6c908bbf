# covers: TOK-4, TOK-5
"""Budget algebra, the compaction threshold and CONTEXT_OVERHEAD."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from comal.errors import BudgetError, ContextOverhead
from comal.tokens import Budget, resolve_window


def test_terms_of_the_algebra() -> None:
    b = Budget(
        window=200_000, system_tokens=3_000, tools_tokens=7_000, output_reserve=16_000, margin=4_000
    )
    assert b.fixed == 10_000
    assert b.input_limit == 180_000
    assert b.history_capacity == 170_000
    assert b.threshold_tokens == 162_000  # 90 % of the input limit, below the hard limit
    assert b.fits(170_000) and not b.fits(170_001)
    assert not b.over_threshold(152_000) and b.over_threshold(152_001)
    assert b.utilization(80_000) == pytest.approx(0.5)
    b.check_overhead()  # fits: no error


def test_defaults_for_a_window() -> None:
    b = Budget.for_window(45_000, system_tokens=1_000, tools_tokens=2_000)
    assert b.output_reserve == 45_000 // 8  # 1/8 of a small window
    assert b.margin == 900  # 2 %
    big = Budget.for_window(200_000, system_tokens=0, tools_tokens=0, max_output=64_000)
    assert big.output_reserve == 16_384  # capped
    small_out = Budget.for_window(200_000, system_tokens=0, tools_tokens=0, max_output=8_192)
    assert small_out.output_reserve == 8_192  # never more than the model can write
    given_values = Budget.for_window(
        10_000, system_tokens=0, tools_tokens=0, output_reserve=100, margin=10
    )
    assert (given_values.output_reserve, given_values.margin) == (100, 10)


def test_budget_from_a_resolved_model_respects_the_input_cap() -> None:
    res = resolve_window("gpt-5", env={"COMAL_MODELS_FILE": ""})
    b = Budget.for_resolution(res, system_tokens=5_000, tools_tokens=5_000)
    assert b.window == 400_000 and b.max_input == 272_000
    assert b.input_limit == 272_000 - b.margin
    assert b.breakdown()["max_input"] == 272_000


def test_context_overhead_shows_the_budget_and_what_to_do() -> None:
    b = Budget.for_window(45_000, system_tokens=12_000, tools_tokens=30_000)
    with pytest.raises(ContextOverhead) as err:
        b.check_overhead()
    message = str(err.value)
    assert err.value.code == "CONTEXT_OVERHEAD"
    assert isinstance(err.value, BudgetError)
    for shown in ("12,000", "30,000", "5,625", "900", "48,525", "45,000", "no request was sent"):
        assert shown in message
    assert message.rstrip(".").endswith("larger window")


def test_exactly_full_is_overhead() -> None:
    b = Budget(window=1_000, system_tokens=400, tools_tokens=400, output_reserve=150, margin=50)
    assert b.history_capacity == 0
    with pytest.raises(ContextOverhead):
        b.check_overhead()
    assert b.utilization(0) == pytest.approx(1.0)


def test_breakdown_lists_every_term() -> None:
    b = Budget.for_window(128_000, system_tokens=2_000, tools_tokens=3_000, max_output=16_384)
    d = b.breakdown()
    assert d["fixed"] == 5_000 and d["window"] == 128_000 and d["threshold_ratio"] == 0.9
    assert d["history_capacity"] == b.history_capacity


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": 0},
        {"system_tokens": -1},
        {"threshold_ratio": 0.0},
        {"threshold_ratio": 1.5},
        {"margin": 1.5},
    ],
)
def test_invalid_budgets_are_rejected(kwargs: dict[str, float]) -> None:
    base: dict[str, float] = {
        "window": 1000,
        "system_tokens": 0,
        "tools_tokens": 0,
        "output_reserve": 0,
        "margin": 0,
    }
    with pytest.raises(ValueError):
        Budget(**{**base, **kwargs})  # type: ignore[arg-type]


tokens = st.integers(min_value=0, max_value=2_000_000)


@given(
    window=st.integers(min_value=1, max_value=2_000_000),
    system=tokens,
    tools=tokens,
    reserve=tokens,
    margin=tokens,
    history=tokens,
    ratio=st.floats(min_value=0.05, max_value=1.0),
)
def test_algebra_properties(
    window: int, system: int, tools: int, reserve: int, margin: int, history: int, ratio: float
) -> None:
    b = Budget(window, system, tools, reserve, margin, threshold_ratio=ratio)
    assert b.history_capacity == window - system - tools - reserve - margin
    assert b.threshold_tokens <= max(b.input_limit, 0)
    overhead = system + tools + reserve + margin >= window
    if overhead:
        with pytest.raises(ContextOverhead):
            b.check_overhead()
    else:
        b.check_overhead()
        # Whatever fits under the threshold fits the window.
        if not b.over_threshold(history):
            assert b.fits(history)
    assert b.over_threshold(history) <= b.over_threshold(history + 1)
