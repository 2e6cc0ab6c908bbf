"""Child process for the agent's crash test: forks agent runs that the test kills with SIGKILL.

It imports comal once, prints ``ready`` and reads one JSON command per line on stdin: ``{"db",
"session", "root", "script", "prompt", "pause_at", "pause_on", "cli"}``. For each it forks a worker
and prints ``spawned PID``; when a worker ends it prints ``exit PID CODE`` (``CODE`` is
``-SIGNAL`` for a killed worker). Forking keeps dozens of kills within seconds, where as many
fresh interpreters would take a minute.

A worker runs the session the way ``comal -p`` / ``comal --resume`` do: it takes the session's
lock, then runs the agent with the script model (``--model script:PATH``) — a fresh session gets
the prompt, a session with history is resumed without one. Every phase of the loop and of the
house is reported as ``PID phase PHASE DETAIL``; at the ``pause_at``-th phase the worker prints
``PID paused`` and sleeps, so the test kills it exactly there (``pause_on`` names the phase
instead: ``"prepared w1"``). Without ``pause_at`` it runs on,
and the test kills it after a random delay. With ``cli`` true the worker goes through
:func:`comal.cli._agent.run_prompt` instead (no probes: random delays only).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from _agent_support import FAST, MODEL, TASK_CHECKS
from _fork_server import say, serve
from comal.agent import Agent, AgentSettings, Flags, ScriptModel, lock_session
from comal.cli import _common
from comal.cli._agent import run_prompt
from comal.ledger import Scope, open_ledger
from comal.ops import House, Policy, Workspace, default_registry, unguarded
from comal.tokens import EstimatingCounter


def work(cmd: dict[str, Any]) -> None:
    me = os.getpid()
    if cmd.get("cli"):
        _common.STATE.ledger_path = cmd["db"]
        say(f"{me} phase started -")
        flags = Flags(model="script:" + cmd["script"], mode="trusted", workspace=Path(cmd["root"]))
        run_prompt(None, flags, resume=cmd["session"], as_json=True)
        return
    count = 0

    def probe(phase: str, detail: str) -> None:
        nonlocal count
        count += 1
        say(f"{me} phase {phase} {detail}")
        if count == cmd.get("pause_at") or f"{phase} {detail}" == cmd.get("pause_on"):
            say(f"{me} paused")
            time.sleep(60)

    led = open_ledger(cmd["db"], counter=EstimatingCounter())
    scope = Scope("t", "a", cmd["session"])
    house = House(
        led,
        scope,
        default_registry(),
        Policy(mode="trusted"),
        workspace=Workspace(cmd["root"]),
        probe=probe,
        guard=unguarded,  # one writer: this driver (the crash test resumes after it dies)
    )
    settings = AgentSettings.for_model(
        MODEL, engine=FAST, preamble=False, checks=TASK_CHECKS, max_turns=20
    )
    say(f"{me} phase started -")
    with lock_session(led, scope):
        provider = ScriptModel(cmd["script"], led, scope)
        agent = Agent(led, scope, provider, house, settings, probe=probe)
        fresh = not led.heads(scope)
        result = agent.run(cmd["prompt"]) if fresh else agent.resume()
    say(f"{me} result {result.status}")


def main() -> None:
    # Warm what forks share. Not the tiktoken counter: its native thread pool would not survive
    # a fork, so each worker that needs it loads it after forking.
    default_registry()
    serve(work)


if __name__ == "__main__":
    main()
