"""Shared helpers for the agent's tests: a scripted multi-step task and an agent over it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comal.agent import Agent, AgentSettings
from comal.context import EngineConfig
from comal.ledger import Scope, SQLiteLedger, open_ledger
from comal.ops import House, Policy, Probe, Workspace, default_registry, unguarded
from comal.providers import Provider
from comal.tokens import EstimatingCounter

MODEL = "claude-sonnet-4-6"
FAST = EngineConfig(counter=EstimatingCounter())


def tool(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def reply(*blocks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"content": list(blocks), **extra}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


# A task with writes, edits that append a line (a duplicated write would show), shell calls, an
# OUTPUT_LENGTH response proposing a write that must never run, and a final answer.
TASK: list[dict[str, Any]] = [
    reply(
        tool("w1", "Write", path="a.txt", content="alpha\n"),
        tool("b1", "Bash", command="cat a.txt"),
        usage={"input_tokens": 1200, "output_tokens": 40},
    ),
    reply(tool("e1", "Edit", path="a.txt", old_string="alpha\n", new_string="alpha\nbeta\n")),
    reply(
        text("Writing the poison file"),
        tool("p1", "Write", path="poison.txt", content="never\n"),
        stop_reason="max_tokens",
    ),
    reply(
        tool("w2", "Write", path="b.txt", content="two\n"),
        tool("e2", "Edit", path="a.txt", old_string="beta\n", new_string="beta\ngamma\n"),
    ),
    reply(tool("b2", "Bash", command="grep -c . a.txt b.txt")),
    reply(text("Done: a.txt has three lines, b.txt has one.")),
]
TASK_FILES = {"a.txt": "alpha\nbeta\ngamma\n", "b.txt": "two\n"}
TASK_ANSWER = "Done: a.txt has three lines, b.txt has one."
TASK_CHECKS = ("grep -q gamma a.txt",)


def write_script(path: Path, replies: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in replies))
    return path


@dataclass
class Rig:
    ledger: SQLiteLedger
    scope: Scope
    root: Path
    house: House
    probe: Probe | None = None

    def agent(self, provider: Provider, **kw: Any) -> Agent:
        """An agent over this rig; the rig's probe sees the loop's phases and the house's."""
        settings = kw.pop("settings", None) or settings_for(**kw.pop("settings_kw", {}))
        kw.setdefault("probe", self.probe)
        return Agent(self.ledger, self.scope, provider, self.house, settings, **kw)

    def read(self, name: str) -> str:
        return (self.root / name).read_text()

    def close(self) -> None:
        self.ledger.close()


def settings_for(**kw: Any) -> AgentSettings:
    kw.setdefault("engine", FAST)
    kw.setdefault("preamble", False)
    return AgentSettings.for_model(kw.pop("model", MODEL), **kw)


def rig(
    tmp_path: Path,
    *,
    policy: Policy | None = None,
    probe: Probe | None = None,
    db: Path | None = None,
    scope: Scope | None = None,
) -> Rig:
    root = tmp_path / "ws"
    root.mkdir(parents=True, exist_ok=True)
    led = open_ledger(db or tmp_path / "ledger.db", counter=EstimatingCounter())
    scope = scope or led.create_session("t", "a")
    house = House(
        led,
        scope,
        default_registry(),
        policy if policy is not None else Policy(mode="trusted"),
        workspace=Workspace(root),
        probe=probe,
        guard=unguarded,  # the test is the session's only writer
    )
    return Rig(led, scope, root, house, probe)


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs (not caught as an Exception)."""


def crash_at(phase: str, nth: int = 1) -> Callable[[str, str], None]:
    seen = 0

    def probe(at: str, detail: str) -> None:
        nonlocal seen
        if at == phase:
            seen += 1
            if seen == nth:
                raise Crash(f"{phase} {detail}")

    return probe
