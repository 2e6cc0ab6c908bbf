"""CCH-2: provider cache prices as data, savedVsUncached per request from measured usage,
summed in ``comal context`` and ``comal sessions``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _cache_support import MODEL, answer, bash, claude, runtime
from comal.agent import Config, Flags, Runtime, session_saving
from comal.bench import Pricer, cached_prefix
from comal.bench._cost import Unit
from comal.cli import app
from comal.errors import InputError
from comal.ledger import open_ledger
from comal.messages import Message, canonical_json
from comal.providers import ModelRequest
from comal.testing import FakeServer, FunctionProvider
from comal.tokens import (
    PRICES_FILE_ENV,
    EstimatingCounter,
    Usage,
    load_prices,
    price_for,
    saved_vs_uncached,
)

# covers: CCH-2

SONNET = price_for("claude-sonnet-4-5")
runner = CliRunner()


def test_saved_vs_uncached_is_negative_cold_and_positive_warm() -> None:
    assert SONNET is not None
    # Turn 1: everything is written to the cache at 125 % of input: a net cost.
    cold = saved_vs_uncached(Usage(50, 0, 3_000, 10, None), SONNET)
    assert cold == pytest.approx(-3_000 * (3.75 - 3.0) / 1e6)
    # Turn 2: 3,000 read at 10 % and 400 written: the read discount wins.
    warm = saved_vs_uncached(Usage(30, 3_000, 400, 10, None), SONNET)
    assert warm == pytest.approx((3_000 * (3.0 - 0.3) - 400 * 0.75) / 1e6)
    # A 1-hour write costs 200 % of input.
    hour = saved_vs_uncached(Usage(30, 3_000, 400, 10, None), SONNET, ttl="1h")
    assert hour == pytest.approx((3_000 * 2.7 - 400 * 3.0) / 1e6)
    # Above 200k prompt tokens the long-context rates apply.
    long = saved_vs_uncached(Usage(1_000, 250_000, 0, 1, None), SONNET)
    assert long == pytest.approx(250_000 * (6.0 - 0.6) / 1e6)


def test_unknown_is_none_never_zero() -> None:
    gpt = price_for("openai:gpt-4.1")
    assert gpt is not None and gpt.cache_write is None
    # OpenAI reports no writes and charges no premium: the saving is still known.
    assert saved_vs_uncached(Usage(100, 900, None, 1, None), gpt) == pytest.approx(
        900 * (2.0 - 0.5) / 1e6
    )
    assert saved_vs_uncached(Usage(100, None, None, 1, None), gpt) is None  # reads unknown
    assert saved_vs_uncached(Usage(None, 5, 5, 1, None), SONNET) is None
    assert saved_vs_uncached(Usage(10, 5, None, 1, None), SONNET) is None  # writes unknown
    assert saved_vs_uncached(Usage(10, 5, 5, 1, None), None) is None
    assert price_for("some-local-model") is None and price_for(None) is None


def test_price_tables_are_data_found_by_model_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert price_for("claude-sonnet-4-5-20250929") is SONNET
    assert price_for("anthropic:claude-sonnet-4.5") is SONNET
    assert price_for("gpt-5.1-codex") is price_for("gpt-5")
    assert {p: t.model for p, t in load_prices().items()} == {
        "anthropic": "claude-sonnet-4-5",
        "openai": "gpt-4.1",
        "gemini": "gemini-2.5-pro",
    }
    own = tmp_path / "prices.json"
    own.write_text(
        json.dumps(
            {
                "prices": [
                    {"provider": "local", "model": "qwen3:32b", "input": 1, "cache_read": 0.5},
                    {"provider": "anthropic", "model": "claude-sonnet-4-5", "input": 4,
                     "cache_read": 0.4, "cache_write": 5},
                ]
            }
        )
    )  # fmt: skip
    monkeypatch.setenv(PRICES_FILE_ENV, str(own))
    local = price_for("qwen3:32b")
    assert local is not None and local.input == 1.0
    assert price_for("claude-sonnet-4-5").input == 4.0  # type: ignore[union-attr]
    own.write_text(json.dumps({"prices": [{"provider": "x", "model": "m", "input": -1}]}))
    with pytest.raises(InputError) as bad:
        price_for("m")
    assert bad.value.path == str(own)


def test_recorded_in_each_request_and_summed_on_the_surfaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "l.db"
    monkeypatch.setenv("COMAL_LEDGER", str(db))
    ws = tmp_path / "ws"
    ws.mkdir()
    cold = {"input_tokens": 50, "cache_creation_input_tokens": 3_000,
            "cache_read_input_tokens": 0, "output_tokens": 10}  # fmt: skip
    warm = {"input_tokens": 30, "cache_creation_input_tokens": 400,
            "cache_read_input_tokens": 3_000, "output_tokens": 10}  # fmt: skip
    script = [bash("c1", "true") | {"usage": cold}, answer("done", **warm), answer("no usage")]
    led = open_ledger(db)
    with FakeServer(script) as server, claude(server) as provider:
        rt = runtime(led, ws, provider)
        assert rt.run("work").status == "finished"
        assert rt.run("again").status == "finished"
    assert rt.scope is not None
    saved = [r.meta["savedVsUncached"] for r in led.requests(rt.scope)]
    assert saved[0] is not None and saved[0] < 0 < saved[1]
    assert saved[2] is None  # the provider reported no usage: unknown, not 0
    total = round(saved[0] + saved[1], 6)
    assert session_saving(led.requests(rt.scope)) == total
    session = rt.scope.session
    led.close()
    context = runner.invoke(app, ["context", session, "--json"])
    assert context.exit_code == 0, context.output
    assert json.loads(context.stdout)["savedVsUncached"] == total
    listed = runner.invoke(app, ["sessions", "--json"])
    assert listed.exit_code == 0, listed.output
    row = next(r for r in json.loads(listed.stdout) if r["session"] == session)
    assert row["savedVsUncached"] == total
    table = runner.invoke(app, ["sessions"], env={"COLUMNS": "200"})
    assert "saved" in table.stdout and f"${total:,.4f}" in table.stdout


def _simulated_usage(counter: EstimatingCounter) -> Any:
    """Anthropic usage as a cache that keeps every prefix would report it: the tokens this
    request repeats from the previous one are read, the rest is written (one breakpoint at the
    end), the reply priming is new input."""
    pricer = Pricer(counter)
    previous: list[tuple[Unit, ...]] = [()]

    def usage(request: ModelRequest) -> dict[str, int]:
        tools = canonical_json([dict(t) for t in request.tools]).encode()
        units = (
            Unit(tools, counter.count(tools.decode())),
            *pricer.units([Message.system(request.system), *request.messages]),
        )
        total = sum(u.tokens for u in units)
        read = cached_prefix(previous[0], units)
        previous[0] = units
        return {"input_tokens": 3, "cache_read_input_tokens": read,
                "cache_creation_input_tokens": total - read, "output_tokens": 40}  # fmt: skip

    return usage


def test_saved_vs_uncached_over_one_run(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(6):
        (ws / f"f{i}.txt").write_text(f"line {i}\n" * (200 + 100 * i))
    usage = _simulated_usage(EstimatingCounter())
    steps = 8

    def model(request: ModelRequest) -> dict[str, Any]:
        n = len(provider.calls)
        reply = answer("done") if n > steps else bash(f"c{n}", f"cat f{n % 6}.txt")
        return reply | {"usage": usage(request)}

    provider = FunctionProvider(model)
    led = open_ledger(tmp_path / "l.db")
    flags = Flags(model=f"anthropic:{MODEL}", workspace=ws, mode="trusted")
    rt = Runtime.open(led, flags, config=Config(), provider=provider)
    assert rt.run("read the files").status == "finished"
    assert rt.scope is not None
    records = led.requests(rt.scope)
    saved = [float(r.meta["savedVsUncached"]) for r in records]
    print("\nsavedVsUncached per request (USD, claude-sonnet-4-6 list prices):")
    for r, s in zip(records, saved, strict=True):
        print(f"  read {r.cache_read:>6,} write {r.cache_write:>6,} ttl {r.meta['cache_ttl']}"
              f" → {s:+.6f}")  # fmt: skip
    print(f"  total {sum(saved):+.6f} over {len(saved)} requests")
    assert saved[0] < 0  # the cold first turn pays the write premium
    assert all(s > 0 for s in saved[1:])  # every later turn reads the prefix it repeats
    assert sum(saved) > 0
    led.close()
