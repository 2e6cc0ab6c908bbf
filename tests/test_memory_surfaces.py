"""Memory across sessions on its surfaces: the model's ``memory_search``, ``comal memory
search``, the cross-session bench row (MEM-2), and output escalation after a compaction
(MEM-3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _agent_support import reply, rig, text, tool
from comal.agent import OPERATOR_ONLY, AgentSettings, Config, settings_from_config
from comal.agent._catalog import model_catalog
from comal.agent._lengths import escalated_reserve
from comal.bench._recall import run_recall
from comal.cli import app
from comal.context import get_engine
from comal.errors import InputError
from comal.ledger import SQLiteLedger, open_ledger
from comal.memory import remember
from comal.messages import Message
from comal.ops import receipts
from comal.providers import ModelRequest, ModelResponse
from comal.testing import FunctionProvider, ScriptedProvider
from comal.tokens import Budget

runner = CliRunner()
FACT = "We decided to deploy the billing service to eu-west-3 on Fridays only."


def _remembering(led: SQLiteLedger, tenant: str = "t", agent: str = "a") -> str:
    """A past session of (tenant, agent) whose first steps were remembered."""
    scope = led.create_session(
        tenant, agent, title="billing", messages=[Message.user(FACT), Message.assistant("Noted.")]
    )
    remember(led, scope, 0, 1, "checkpointed")
    return scope.session


def _cli(db: Path, *args: str, code: int = 0) -> str:
    result = runner.invoke(app, ["--ledger", str(db), *args])
    assert result.exit_code == code, result.output
    return result.stdout


def test_comal_memory_search(tmp_path: Path) -> None:
    # covers: MEM-2, LED-2
    db = tmp_path / "m.db"
    with open_ledger(db) as led:
        past = _remembering(led)
        _remembering(led, agent="other")
        now = led.create_session("t", "a", messages=[Message.user("where do we deploy?")])
    found = json.loads(_cli(db, "memory", "search", "deploy billing", "--tenant", "t",
                            "--agent", "a", "--json"))  # fmt: skip
    assert (found["tenant"], found["agent"]) == ("t", "a")
    results = found["results"]
    assert results and {r["session"] for r in results} == {past, now.session}
    assert results[0]["kind"] == "memory" and "eu-west-3" in results[0]["text"]
    keys = {"kind", "id", "session", "first_seq", "last_seq", "entry_ids", "label", "text"}
    assert all(keys | {"score", "session_title", "session_started"} <= set(r) for r in results)
    # As the current session's model would see it: its own entries are not "past".
    as_now = json.loads(_cli(db, "memory", "search", "deploy", "--session", now.session[:8],
                             "--json"))["results"]  # fmt: skip
    assert as_now and all(r["session"] == past for r in as_now)
    shown = _cli(db, "memory", "search", "deploy", "--session", now.session[:8])
    assert "eu-west-3" in shown and "memory" in shown
    refused = json.loads(_cli(db, "memory", "search", "deploy", "--tenant", "t", "--json", code=2))
    assert refused["error"]["code"] == "SCOPE_INCOMPLETE"
    both = _cli(db, "memory", "search", "x", "--session", past[:8], "--tenant", "t", "--json",
                code=2)  # fmt: skip
    assert json.loads(both)["error"]["code"] == "USER_ERROR"
    assert "memory" in _cli(db, "--help") and "search" in _cli(db, "memory", "--help")


def test_the_model_recalls_an_earlier_session_and_only_its_agents(tmp_path: Path) -> None:
    # covers: MEM-2, OPS-1, OPS-2, LED-2
    r = rig(tmp_path)  # session of tenant "t", agent "a"
    past = _remembering(r.ledger)
    _remembering(r.ledger, agent="spy")
    forged = tool("m2", "memory_search", query="deploy", tenant="t", agent="spy")
    provider = ScriptedProvider(
        [
            reply(tool("m1", "memory_search", query="where do we deploy billing")),
            reply(forged),
            reply(text("eu-west-3, on Fridays.")),
        ]
    )
    result = r.agent(provider).run("Where do we deploy billing?")
    assert result.status == "finished"
    recalled = provider.calls[1].messages[-1].text
    assert "eu-west-3" in recalled and past[:8] in recalled
    done = {x.call_id: x for x in receipts(r.ledger, r.scope)}
    assert done["m1"].status == "ok" and done["m1"].operation == "memory_search"
    assert done["m2"].status != "ok"  # a scope is never an argument: refused by the contract
    for engine in ("limit", "dag", "pipeline"):  # offered under every engine
        catalog = model_catalog(r.house.catalog("model"), get_engine(engine))
        assert "memory_search" in {op.name for op in catalog.operations}


def test_escalated_reserve_stays_within_the_window_and_the_model() -> None:
    # covers: MEM-3, TOK-4
    budget = Budget.for_window(100_000, system_tokens=1_000, tools_tokens=1_000)
    assert escalated_reserve(12_500, budget, 20_000, None, 32_768) == 32_768
    room = budget.window - 90_000 - budget.margin
    assert escalated_reserve(5_000, budget, 90_000, None, 32_768) == room
    assert escalated_reserve(5_000, budget, 20_000, 8_192, 32_768) == 8_192
    assert escalated_reserve(12_500, budget, 99_000, None, 32_768) == 12_500  # never below


def _max_outputs(tmp_path: Path, **settings: Any) -> tuple[list[int], list[dict[str, Any]]]:
    r = rig(tmp_path)
    asked: list[int] = []

    def answer(req: ModelRequest) -> ModelResponse | dict[str, object]:
        asked.append(req.max_output_tokens or 0)
        n = len(asked)
        if n < 24:
            return reply(tool(f"b{n}", "Bash", command=f"seq 1 {40 + n}"))
        return reply(text("done"))

    agent = r.agent(FunctionProvider(answer), settings_kw={"context_window": 6_000, **settings})
    assert agent.run("print numbers").status == "finished"
    metas = [q.meta for q in r.ledger.requests(r.scope)]
    assert r.ledger.checkpoints(r.scope), "the small window never made the engine derive"
    return asked, metas


def test_the_first_request_after_a_compaction_may_write_more(tmp_path: Path) -> None:
    # covers: MEM-3, LIM-3
    asked, metas = _max_outputs(tmp_path / "on")
    reserve = min(asked)
    raised = [i for i, m in enumerate(metas) if "output_escalated" in m]
    assert raised, "no request after a checkpoint asked for more"
    for i in raised:
        m = metas[i]
        assert m["output_escalated"]["from"] == reserve < asked[i] == m["max_output_tokens"]
        assert m["output_escalated"]["after"] == "checkpointed"
        # Within the window's room over its input, never beyond it.
        assert asked[i] <= m["window"] - m["estimate"]["tokens"]
        assert i + 1 == len(metas) or asked[i + 1] == reserve  # only the first one after it
    off, _ = _max_outputs(tmp_path / "off", output_escalation=None)
    assert set(off) == {reserve}


def test_output_escalation_is_an_operator_setting_with_a_range() -> None:
    # covers: MEM-3, CFG-1, CFG-2
    assert "output_escalation" in OPERATOR_ONLY
    default = settings_from_config(Config(), "claude-sonnet-4-6")
    assert default.output_escalation == 32_768
    off = Config.model_validate({"output_escalation": {"enabled": False}})
    assert settings_from_config(off, "claude-sonnet-4-6").output_escalation is None
    mine = Config.model_validate({"output_escalation": {"max_tokens": 65_536}})
    assert settings_from_config(mine, "claude-sonnet-4-6").output_escalation == 65_536
    from comal.agent._config import _validate

    for bad in (1_000, 200_000):
        with pytest.raises(InputError) as err:
            _validate({"output_escalation": {"max_tokens": bad}}, "test.json")
        assert "4,096..128,000" in str(err.value) or "4096" in str(err.value)
    assert AgentSettings.for_model("claude-sonnet-4-6").output_escalation == 32_768


def test_bench_recall_has_the_cross_session_rows(tmp_path: Path) -> None:
    # covers: MEM-2
    turns = []
    for n in range(48):
        speaker = "Ann" if n % 2 == 0 else "Bo"
        line = f"turn {n} about topic{n % 9} and the {['lake', 'kiln', 'violin'][n % 3]}: "
        line += " ".join(f"filler{n}x{i}" for i in range(30))
        if n == 7:
            line = "I love my greyhound called Pixel, adopted last spring. " + line
        turns.append({"speaker": speaker, "dia_id": f"D{n // 24 + 1}:{n % 24 + 1}", "text": line})
    doc = {
        "speaker_a": "Ann", "speaker_b": "Bo", "session_1": turns[:24], "session_2": turns[24:],
        "qa": [{"question": "What is the greyhound called?", "evidence": ["D1:8"],
                "category": 1}],
    }  # fmt: skip
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    rows = {r.strategy: r.as_dict() for r in run_recall([path], window=4_000, ks=(1, 5))}
    assert {"memory_search", "memories-only", "sessions-only", "bm25"} <= set(rows)
    for name in ("memory_search", "memories-only", "sessions-only"):
        assert rows[name]["in_context"] is None and rows[name]["items"] == 1
    assert rows["memory_search"]["recall_at"]["1"] == 1.0  # the greyhound, found first
    assert rows["memories-only"]["recall_at"]["5"] == 1.0  # a preference, remembered
