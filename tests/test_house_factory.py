"""One house factory: every house is built from the loaded configuration by one factory, so a
child's house, the checks' house and the proxy's recall house judge as the agent's does.

# covers: OPS-1, OPS-3
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _agent_support import reply, text, tool
from comal.agent import HUMAN_OPERATIONS, Config, Flags, Runtime
from comal.ledger import open_ledger
from comal.messages import ToolCall
from comal.ops import Actor, House, Policy, Workspace, default_registry
from comal.testing import FunctionProvider, ScriptedProvider
from comal.tokens import EstimatingCounter


def _runtime(tmp_path: Path, provider: Any, **config: Any) -> Runtime:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    led = open_ledger(tmp_path / "ledger.db", counter=EstimatingCounter())
    flags = Flags(model="anthropic:claude-sonnet-4-6", workspace=ws, mode="trusted")
    return Runtime.open(led, flags, config=Config(**config), provider=provider)


def test_a_child_house_keeps_the_lock_guard_and_the_policy(tmp_path: Path) -> None:
    # covers: RES-2, LED-3 (a child's house was built outside the factory, without the guard)
    rt = _runtime(tmp_path, FunctionProvider(lambda r: {}), deny=["Bash(rm *)"])
    rt.start("hello")
    parent = rt.agent()  # built outside a run: this process does not hold the session
    child = parent.spawn_child(title="helper")
    assert child.scope.session != parent.scope.session
    write = ToolCall("w1", "Write", json.dumps({"path": "x.txt", "content": "no\n"}))
    outcome = child.house.run(write, Actor.user("ana"), surface="cli")
    assert outcome.result.is_error
    assert "SESSION_NOT_HELD" in json.dumps(dict(outcome.receipt.observations))
    assert not (rt.workspace.root / "x.txt").exists()
    rm = ToolCall("r1", "Bash", json.dumps({"command": "rm -rf x"}))
    judged = child.house.run(rm, Actor.user("ana"), surface="cli")
    assert judged.judgment.decision.action == "deny"  # the configuration's rule, in the child
    rt.ledger.close()


def test_a_child_runs_while_the_parent_holds_the_session(tmp_path: Path) -> None:
    # covers: LED-3, RES-2
    script = ScriptedProvider([reply(tool("w", "Write", path="c.txt", content="c\n")),
                               reply(text("done"))])  # fmt: skip
    rt = _runtime(tmp_path, FunctionProvider(lambda r: {"content": "parent done"}))
    seen: dict[str, Any] = {}

    def parent_turn(req: Any) -> dict[str, Any]:
        if not seen:
            child = rt.active.spawn_child(provider=script)  # type: ignore[union-attr]
            seen["result"] = child.run("write c")
        return {"content": "parent done"}

    rt.fixed_provider = FunctionProvider(parent_turn)
    assert rt.run("go").status == "finished"
    assert seen["result"].status == "finished"
    assert (rt.workspace.root / "c.txt").read_text() == "c\n"
    rt.ledger.close()


def test_human_operations_are_values_bound_to_the_host_through_the_house(
    tmp_path: Path,
) -> None:
    # covers: OPS-1, OPS-6 (closures over the runtime became one registered list)
    one = _runtime(tmp_path / "a", FunctionProvider(lambda r: {}))
    two = _runtime(tmp_path / "b", FunctionProvider(lambda r: {}))
    for name in ("context", "state", "compact"):
        assert one.registry.get(name) is two.registry.get(name)
        assert one.registry.get(name) in HUMAN_OPERATIONS
    one.start("hello")
    report = one.control("context", {})
    assert not report.result.is_error and report.receipt.observations["report"]["engine"]
    # A house no host runs has nothing to report on: a coded error, with a receipt.
    bare = House.of(one.ledger, one.need_scope(), one.registry, Policy(mode="trusted"))
    call = ToolCall("c1", "context", "{}")
    outcome = bare.run(call, Actor.user("ana"), surface="cli")
    assert outcome.result.is_error and "needs the session's host" in outcome.result.text
    one.ledger.close()
    two.ledger.close()


def test_the_agent_house_and_a_registry_house_share_one_policy(tmp_path: Path) -> None:
    # covers: OPS-3
    rt = _runtime(tmp_path, FunctionProvider(lambda r: {}), deny=["Read(secret*)"])
    rt.start("hello")
    factory = rt.houses()
    assert factory.policy == rt.house().policy
    other = factory.but(registry=default_registry()).house(rt.need_scope())
    read = ToolCall("r1", "Read", json.dumps({"path": "secret.txt"}))
    judged = other.run(read, Actor.user("ana"), surface="cli")
    assert judged.judgment.decision.action == "deny"
    assert isinstance(other.workspace, Workspace)
    rt.ledger.close()
