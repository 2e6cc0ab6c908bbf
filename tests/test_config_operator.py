"""CFG-2: operator-only settings cannot be changed by the model through any operation.

Every operation the model is offered is tried against the configuration file — a file inside
the workspace under a name of the operator's choosing (``COMAL_CONFIG``), so no path rule
protects it by accident — and every human control is proposed by the model. The file keeps its
bytes and the settings stay what the operator wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from comal.agent import OPERATOR_ONLY, Config, Flags, Runtime, load_config
from comal.ledger import open_ledger
from comal.messages import Message, ToolCall
from comal.ops import human_controls
from comal.testing import FunctionProvider

# covers: CFG-2, OPS-6

OPERATOR = {
    "engine": "limit",
    "engine_settings": {"keep_recent_results": 3},
    "context_window": 64_000,
    "spend": {"execution": 100_000},
    "cache": {"promote_after_turns": 4},
}


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    ws = tmp_path / "ws"
    (ws / "ops").mkdir(parents=True)
    conf = ws / "ops" / "agent-settings.json"
    conf.write_text(json.dumps(OPERATOR))
    monkeypatch.setenv("COMAL_CONFIG", str(conf))
    led = open_ledger(tmp_path / "l.db")
    scope = led.create_session("local", "comal", meta={"workspace": str(ws)})
    led.append(scope, [Message.user("hi")])
    provider = FunctionProvider(lambda request: {"content": "ok"})
    flags = Flags(model="anthropic:claude-sonnet-4-6", workspace=ws, mode="trusted")
    rt = Runtime.open(led, flags, resume=scope.session, provider=provider)
    yield rt, conf
    led.close()


def _attempts(conf: Path, rel: str) -> dict[str, list[dict[str, Any]]]:
    bigger = json.dumps({**OPERATOR, "spend": {"execution": 10**11}, "engine": "dag"})
    return {
        "Write": [
            {"path": rel, "content": bigger},
            {"path": str(conf), "content": bigger},
            {"path": "ops/../ops/agent-settings.json", "content": bigger},
        ],
        "Edit": [
            {"path": rel, "old_string": '"limit"', "new_string": '"dag"'},
            {"path": str(conf), "old_string": "100000", "new_string": "100000000000"},
        ],
        "Bash": [
            {"command": f"echo '{bigger}' > {rel}"},
            {"command": f"cp /dev/null {conf}"},
            {"command": "sh -c 'echo x > \"$COMAL_CONFIG\"'"},
            {"command": f"cd ops && printf '{{}}' > {conf.name}"},
            {"command": f"python3 -c \"open('{rel}', 'w').write('{{}}')\""},
            {"command": f"mv {rel} {rel}.bak"},
        ],
        # A GET writes nothing here; a file URL and a local service are refused before any.
        "WebFetch": [
            {"url": f"file://{conf}"},
            {"url": "http://127.0.0.1:9/config?spend=100000000000"},
        ],
    }


def test_no_model_operation_reaches_the_operator_settings(setup: Any) -> None:
    rt, conf = setup
    before = conf.read_bytes()
    agent = rt.agent()
    offered = agent.catalog
    rel = "ops/agent-settings.json"
    attempts = _attempts(conf, rel)
    # Operations that cannot write anything: the house's own declaration says so.
    readers = {op.name for op in offered.operations if op.read_only}
    assert {"Read", "Glob", "Grep", "EvidenceRead", "ToolSearch"} <= readers
    untried = set(offered.names) - readers - set(attempts)
    assert not untried, f"add an attempt at the configuration for: {sorted(untried)}"
    outcomes = []
    for name, tries in attempts.items():
        for i, args in enumerate(tries):
            call = ToolCall(f"{name}-{i}", name, json.dumps(args))
            outcome = agent.house.run(call, agent.actor, surface="model", offered=offered)
            outcomes.append((name, args, outcome.receipt.status, outcome.result.text[:200]))
            assert conf.read_bytes() == before, (name, args, outcome.result.text)
    # Write and Edit never even start; Bash is denied or fails inside the sandbox.
    for name, args, status, text in outcomes:
        wanted = ("denied",) if name in ("Write", "Edit") else ("denied", "error")
        assert status in wanted, (name, args, status, text)
    # The human controls, proposed by the model, are refused whatever they say.
    for control in [*(op.name for op in human_controls()), "context", "compact", "state"]:
        call = ToolCall(f"h-{control}", control, json.dumps({"mode": "trusted"}))
        outcome = agent.house.run(call, agent.actor, surface="model", offered=offered)
        assert outcome.receipt.status == "denied", control
    assert not set(offered.names) & {op.name for op in human_controls()}
    # The operator's values are intact, and the running settings are frozen values.
    config = load_config()
    assert config == Config.model_validate(OPERATOR)
    settings = rt.settings()
    assert (settings.window.window, settings.spend.execution) == (64_000, 100_000)
    assert settings.cache.promote_after_turns == 4
    assert OPERATOR_ONLY >= {"engine", "engine_settings", "context_window", "spend", "cache"}
