"""``comal bench proxy``: the comparison mode (direct, LiteLLM, comal with 1 and N workers).

LiteLLM lives in a venv of its own (``make litellm``: build/litellm); without it its rows say
why and the bench still exits 0. The test that runs it skips, saying so, where it is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from comal.bench._proxy_compare import (
    PathRow,
    find_litellm,
    litellm_command,
    litellm_config,
    run_proxy_comparison,
)
from comal.cli import app

runner = CliRunner()


def test_the_litellm_config_points_an_anthropic_model_at_the_fake_server_offline() -> None:
    # covers: SCL-2
    text = litellm_config("http://127.0.0.1:4242", master_key="sk-test")
    yaml = pytest.importorskip(
        "yaml", reason="PyYAML is not installed (the bench extra: make installs it)"
    )
    config = yaml.safe_load(text)
    (model,) = config["model_list"]
    assert model["model_name"] == "claude-sonnet-4-5"
    assert model["litellm_params"] == {
        "model": "anthropic/claude-sonnet-4-5",
        "api_base": "http://127.0.0.1:4242",
        "api_key": "x",
    }
    settings = config["litellm_settings"]
    assert settings["telemetry"] is False
    assert settings["callbacks"] == settings["success_callback"] == []
    assert config["general_settings"]["master_key"] == "sk-test"
    assert "database_url" not in config["general_settings"]


def test_the_litellm_command_runs_a_binary_or_a_python_on_loopback(tmp_path: Path) -> None:
    # covers: SCL-2
    config = tmp_path / "c.yaml"
    binary = litellm_command(Path("/x/bin/litellm"), config, 4000, 2)
    assert binary[:3] == ["/x/bin/litellm", "--config", str(config)]
    assert binary[binary.index("--host") + 1] == "127.0.0.1"
    assert binary[binary.index("--num_workers") + 1] == "2"
    python = litellm_command(Path("/x/bin/python3"), config, 4000)
    assert python[:2] == ["/x/bin/python3", "-c"]
    assert "run_server" in python[2]


def test_a_litellm_that_is_not_there_is_said(tmp_path: Path) -> None:
    # covers: SCL-2
    program, why = find_litellm(tmp_path / "nowhere")
    assert program is None and why is not None and "nowhere" in why
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "litellm").write_text("#!/bin/sh\n")
    assert find_litellm(venv) == ((venv / "bin" / "litellm").absolute(), None)


def test_the_comparison_skips_litellm_with_its_reason_and_exits_0(tmp_path: Path) -> None:
    # covers: SCL-2
    missing = tmp_path / "no-litellm"
    result = runner.invoke(
        app,
        [
            *("bench", "proxy", "--concurrency", "1", "--turns", "2", "--workers", "1"),
            *("--litellm", str(missing), "--json"),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = {r["path"]: r for r in report["rows"]}
    assert set(rows) == {"direct", "litellm", "comal"}
    assert rows["litellm"]["skipped"] and str(missing) in rows["litellm"]["skipped"]
    for path in ("direct", "comal"):
        assert rows[path]["skipped"] is None
        assert rows[path]["requests_sent"] == rows[path]["reached_upstream"] == 2
        assert rows[path]["failures"] == 0
    assert rows["comal"]["recorded"] == 2
    assert rows["comal"]["added_p50_ms"] is not None
    assert report["duplicated_entries"] == 0
    assert report["litellm"] is None


def test_litellm_row_reaches_the_fake_server() -> None:
    # covers: SCL-2
    program, why = find_litellm()
    if program is None:
        pytest.skip(f"the LiteLLM row cannot run here: {why}")
    report = run_proxy_comparison(concurrency=(1,), turns=2, workers=1)
    rows = {r.path: r for r in report.rows}
    litellm: PathRow = rows["litellm"]
    assert litellm.skipped is None
    # Every request went through LiteLLM to FakeServer and came back whole.
    assert litellm.requests_sent == litellm.reached_upstream == 2
    assert litellm.failures == 0
    assert litellm.added_p50_ms is not None


def test_each_client_may_have_a_connection_pool_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # At 64 clients one shared pool held requests back for seconds before they were sent (the
    # server's receipt said so): the load generator's queue, not the proxy's. Each agent has an
    # HTTP client of its own; --pool-per-client measures that way.
    import asyncio

    import httpx

    from comal.bench import _proxy
    from comal.testing import FakeServer

    made: list[httpx.AsyncClient] = []

    class Counted(httpx.AsyncClient):
        def __init__(self, **kwargs: object) -> None:
            super().__init__(**kwargs)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr(_proxy.httpx, "AsyncClient", Counted)
    with FakeServer([{"content": f"r{k}"} for k in range(12)]) as fake:
        for per_client, pools in ((True, 3), (False, 1)):
            made.clear()
            latencies, _, failures = asyncio.run(
                _proxy._load(fake.anthropic_base_url, 3, 2, False, 0, per_client=per_client)
            )
            assert (len(made), len(latencies), failures) == (pools, 6, 0)
