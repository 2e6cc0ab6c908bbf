"""The bench's cost model on cases small enough to compute by hand."""

from __future__ import annotations

import pytest

from comal.bench import CostMeter, Pricer, PriceTable, cached_prefix, load_prices, wire_groups
from comal.bench._cost import Unit, common_prefix
from comal.messages import Message, ToolCall
from comal.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING


class CharCounter:
    """One token per character, so every price below can be checked with a pencil."""

    name = "chars"

    def count(self, text: str) -> int:
        return len(text)


def test_price_tables_hold_the_verified_list_prices() -> None:
    # covers: CCH-2
    tables = load_prices()
    anthropic, openai, gemini = tables["anthropic"], tables["openai"], tables["gemini"]
    assert (anthropic.model, anthropic.input, anthropic.cache_read) == ("claude-sonnet-4-5", 3, 0.3)
    assert anthropic.cache_write == pytest.approx(1.25 * anthropic.input)
    assert anthropic.cache_read == pytest.approx(0.10 * anthropic.input)
    assert (openai.model, openai.input, openai.cache_write) == ("gpt-4.1", 2.0, None)
    assert openai.cache_read == pytest.approx(0.25 * openai.input)  # GPT-4.1: 75 % off
    assert (gemini.model, gemini.input, gemini.cache_write) == ("gemini-2.5-pro", 1.25, None)
    assert gemini.cache_read == pytest.approx(0.10 * gemini.input)
    assert all(t.source for t in tables.values())


def test_one_request_is_priced_per_provider_by_hand() -> None:
    # covers: CCH-2
    tables = load_prices()
    # 3,000 input tokens, 1,000 of them read from the cache.
    assert tables["anthropic"].cost(1_000, 3_000) == pytest.approx(
        (1_000 * 0.3 + 2_000 * 3.75) / 1e6
    )
    assert tables["openai"].cost(1_000, 3_000) == pytest.approx((1_000 * 0.5 + 2_000 * 2.0) / 1e6)
    assert tables["gemini"].cost(1_000, 3_000) == pytest.approx(
        (1_000 * 0.125 + 2_000 * 1.25) / 1e6
    )
    # Without caching everything is base input, so Anthropic's write premium can lose money.
    assert tables["anthropic"].uncached(3_000) == pytest.approx(9_000 / 1e6)
    assert tables["anthropic"].cost(0, 3_000) > tables["anthropic"].uncached(3_000)
    # Above 200k input tokens Gemini 2.5 Pro bills its long-context rates.
    assert tables["gemini"].cost(100_000, 250_000) == pytest.approx(
        (100_000 * 0.25 + 150_000 * 2.5) / 1e6
    )
    with pytest.raises(ValueError):
        tables["openai"].cost(5, 4)


def test_a_table_without_write_premium_bills_uncached_input_at_base_rate() -> None:
    # covers: CCH-2
    table = PriceTable("x", "m", input=10.0, cache_read=1.0, cache_write=None, per_tokens=1_000)
    assert table.cost(cached=30, total=100) == pytest.approx((30 * 1 + 70 * 10) / 1_000)


def test_units_group_as_anthropic_sends_them() -> None:
    call = ToolCall("c1", "bash", '{"command": "ls"}')
    msgs = [
        Message.system("a"),
        Message.system("b"),
        Message.user("task"),
        Message.assistant("", call),
        Message.tool("c1", "out"),
        Message.user("also this"),
        Message.assistant("done"),
    ]
    groups = wire_groups(msgs)
    assert [len(g) for g in groups] == [2, 1, 1, 2, 1]
    # The tool result and the user text after it travel as one user message.
    assert [m.role.value for m in groups[3]] == ["tool", "user"]


def test_unit_bytes_are_the_canonical_anthropic_json() -> None:
    pricer = Pricer(CharCounter())
    (unit,) = pricer.units([Message.user("u" * 20)])
    assert unit.data == b'{"messages":[{"content":"' + b"u" * 20 + b'","role":"user"}]}'
    assert unit.tokens == MESSAGE_OVERHEAD + 20


def test_common_prefix_and_cached_prefix_by_hand() -> None:
    assert common_prefix(b"abcdef", b"abcxef") == 3
    assert common_prefix(b"abc", b"abc") == 3
    assert common_prefix(b"", b"abc") == 0
    a, b = Unit(b"x" * 100, 10), Unit(b"y" * 200, 20)
    changed = Unit(b"y" * 50 + b"z" * 150, 40)
    # Whole identical units count in full; the first differing one by its shared byte share.
    assert cached_prefix([a, b], [a, b, Unit(b"new", 7)]) == 30
    assert cached_prefix([a, b], [a, changed]) == 10 + 40 * 50 // 200
    assert cached_prefix([b, a], [a, b]) == 0
    assert cached_prefix([], [a]) == 0


def test_a_run_of_requests_is_metered_against_the_previous_request() -> None:
    # covers: CCH-2
    tables = load_prices()
    pricer = Pricer(CharCounter())
    meter = CostMeter(tables)
    system, task = Message.system("s" * 100), Message.user("u" * 200)
    first = meter.add(pricer.units([system, task]))
    assert (first.tokens, first.cached) == (104 + 204 + REPLY_PRIMING, 0)
    assert first.usd["anthropic"] == pytest.approx(first.tokens * 3.75 / 1e6)

    second = meter.add(pricer.units([system, task, Message.assistant("a" * 50)]))
    assert (second.tokens, second.cached) == (104 + 204 + 54 + REPLY_PRIMING, 104 + 204)
    assert second.usd["openai"] == pytest.approx((308 * 0.5 + 57 * 2.0) / 1e6)

    # The task's last character changes: the system prompt is read, and of the task unit the
    # bytes up to that character are shared.
    edited = Message.user("u" * 199 + "v")
    third = meter.add(pricer.units([system, edited]))
    head = len(b'{"messages":[{"content":"') + 199
    whole = len(b'{"messages":[{"content":"') + 200 + len(b'","role":"user"}]}')
    assert third.cached == 104 + 204 * head // whole
    assert meter.tokens == first.tokens + second.tokens + third.tokens
    assert meter.hit == pytest.approx((second.cached + third.cached) / meter.tokens)
    assert meter.usd["gemini"] == pytest.approx(
        sum(r.usd["gemini"] for r in (first, second, third))
    )


def test_the_cache_expires_when_its_lifetime_passed_since_the_previous_request() -> None:
    # covers: CCH-2, ENG-1
    tables = load_prices()
    pricer = Pricer(CharCounter())
    system, task = Message.system("s" * 100), Message.user("u" * 200)
    grown = [system, task, Message.assistant("a" * 50)]
    meter = CostMeter(tables)
    meter.add(pricer.units([system, task]), at=0.0)
    warm = meter.add(pricer.units(grown), at=299.0)  # inside 5 minutes: read from the cache
    assert (warm.cold, warm.cached) == (False, 308)
    cold = meter.add(pricer.units([*grown, Message.user("x")]), at=299.0 + 301.0)
    # More than 5 minutes after the one before: nothing is cached, everything is written.
    assert (cold.cold, cold.cached) == (True, 0)
    assert cold.usd["anthropic"] == pytest.approx(cold.tokens * 3.75 / 1e6)
    assert meter.cold == 1
    # A request whose time is unknown (a transcript without times) finds the cache warm.
    untimed = CostMeter(tables)
    untimed.add(pricer.units([system, task]))
    assert untimed.add(pricer.units(grown), at=10_000.0).cached == 308


def test_a_one_hour_cache_lives_an_hour_and_its_writes_cost_the_hour_rate() -> None:
    # covers: CCH-2, CCH-4
    tables = load_prices()
    pricer = Pricer(CharCounter())
    system, task = Message.system("s" * 100), Message.user("u" * 200)
    meter = CostMeter(tables, "1h")
    first = meter.add(pricer.units([system, task]), at=0.0)
    assert first.usd["anthropic"] == pytest.approx(first.tokens * 6.0 / 1e6)
    later = meter.add(pricer.units([system, task, Message.assistant("a")]), at=30 * 60.0)
    assert (later.cold, later.cached) == (False, 308)
    gone = meter.add(pricer.units([system, task, Message.assistant("a")]), at=30 * 60.0 + 3_601)
    assert (gone.cold, gone.cached) == (True, 0)
