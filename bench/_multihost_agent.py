"""The agent side of ``multihost_faults.py``: a fork server (``tests/_fork_server.py``) whose
workers each run one agent's session on the PostgreSQL ledger until it is finished.

A worker starts its own session (``os.setsid``), so the driver's ``killpg`` takes the agent and
its shell calls and nothing else. It runs the session the way ``comal --resume`` does: opens the
ledger, takes the session's lock (recording the dead holder it clears), and runs the real agent
loop with the dag engine (inline compaction) and a scripted model (``ScriptModel``: the k-th
model call of a session gets the k-th reply, k read from the ledger, so a resumed agent goes on
where the ledger stopped). When PostgreSQL goes away under it, it opens everything again and
resumes, as a restarted process would. It reports ``PID started``, ``PID locked`` (it holds the
session's lock), ``PID retry WHY`` and ``PID finished``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _fork_server import say, serve

MODEL = "claude-sonnet-4-6"
WINDOW = 32_000
TENANT = "hosts"


def script(k: int, steps: int) -> list[dict[str, Any]]:
    """Agent ``k``'s replies: ``steps`` shell calls, each appending one line to ``effects.log``
    (the effect counted outside the ledger) and printing enough to force summaries, then the
    answer."""
    replies: list[dict[str, Any]] = []
    for i in range(steps):
        # The pause gives kills a window inside the call: its receipt is then uncertain.
        command = f"echo a{k}.c{i} >> effects.log; sleep 0.1; seq {i} 700"
        call: dict[str, Any] = {"type": "tool_use", "id": f"a{k}c{i}", "name": "Bash"}
        call["input"] = {"command": command}
        replies.append({"content": [call], "usage": {"input_tokens": 900, "output_tokens": 30}})
    replies.append({"content": [{"type": "text", "text": answer(k)}]})
    return replies


def answer(k: int) -> str:
    return f"Agent {k} ran every step."


def _run(cmd: dict[str, Any]) -> None:
    from comal.agent import Agent, AgentSettings, ScriptModel, lock_session
    from comal.context.dag import DagConfig
    from comal.ledger import Scope, open_ledger
    from comal.ops import House, Policy, Workspace, default_registry
    from comal.tokens import EstimatingCounter

    counter = EstimatingCounter()
    led = open_ledger(cmd["url"], counter=counter)
    try:
        scope = Scope(TENANT, f"agent-{cmd['k']}", cmd["session"])
        if led.session(scope) is None:
            led.create_session(scope.tenant, scope.agent, session_id=scope.session)
        house = House.of(
            led, scope, default_registry(), Policy(mode="trusted"), workspace=Workspace(cmd["root"])
        )
        settings = AgentSettings.for_model(
            MODEL,
            context_window=WINDOW,
            # A killed agent's compaction lease holds off the next one's until it expires (60 s
            # by default, longer than this run): short, so resumed agents take it over.
            engine=DagConfig(counter=counter, defer_compaction=False, lease_ttl_s=cmd["lease_ttl"]),
            engine_name="dag",
            preamble=False,
            max_turns=200,
        )
        with lock_session(led, scope):
            say(f"{os.getpid()} locked")
            info = led.session(scope)
            if info is not None and info.status == "finished":
                return  # killed after finishing, before it could say so
            agent = Agent(led, scope, ScriptModel(cmd["script"], led, scope), house, settings)
            result = agent.run(cmd["prompt"]) if not led.heads(scope) else agent.resume()
            if result.status != "finished":
                raise RuntimeError(f"the agent stopped: {result.status}")
    finally:
        try:
            led.close()
        except Exception:  # the connection may already be gone with the server
            pass


def work(cmd: dict[str, Any]) -> int:
    with contextlib.suppress(PermissionError):  # a group leader already (run by hand)
        os.setsid()
    me = os.getpid()
    say(f"{me} started")
    for _ in range(cmd.get("attempts", 300)):
        try:
            _run(cmd)
            say(f"{me} finished")
            return 0
        except Exception as exc:  # the database is restarting, or a dead holder's lock lingers
            # The innermost frame of comal's own code: where an error came from.
            frames = traceback.extract_tb(exc.__traceback__)
            where = next((f for f in reversed(frames) if "/comal/" in f.filename), frames[-1])
            why = f"{type(exc).__name__}: {exc} at {Path(where.filename).name}:{where.lineno}"
            why = why.replace("\n", " ")[:400]
            say(f"{me} retry {why}")
            time.sleep(0.3)
    return 3


def main() -> None:
    from comal.ops import default_registry

    default_registry()  # warm what the forks share; no connection is opened before a fork
    serve(lambda cmd: work(cmd))


if __name__ == "__main__":
    if len(sys.argv) > 1:  # one command by hand: python bench/_multihost_agent.py '{...}'
        sys.exit(work(json.loads(sys.argv[1])))
    main()
