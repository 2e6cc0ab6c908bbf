"""Child process for the house's crash test: forks workers that make prepared writes.

It imports comal once, prints ``ready`` and then reads one JSON command per line on stdin:
``{"db", "session", "root", "name", "kind", "k", "pause"}``. For each it forks a worker and
prints ``spawned PID``; the parent kills workers with SIGKILL. Forking keeps 40+ kills within
seconds where 40 fresh interpreters would take most of a minute.

A worker appends the assistant message proposing its call and lets the house handle it. KIND is
``write`` (replace the file with version K) or ``edit`` (insert ``line-K`` before ``END``). The
probe prints ``PID PHASE CALL_ID`` for every house phase and sleeps at PAUSE (``prepared`` or
``written``), so the parent kills the worker exactly there. PAUSE ``burst`` runs edits K, K+1,
... without pausing until the parent kills it at a random moment.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from comal.ledger import Scope, open_ledger
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, Workspace, default_registry, unguarded
from comal.tokens import EstimatingCounter


def say(text: str) -> None:
    # One short write per line: lines from concurrent workers never interleave in the pipe.
    os.write(1, (text + "\n").encode())


def work(cmd: dict[str, Any]) -> None:
    led = open_ledger(cmd["db"], counter=EstimatingCounter())
    scope = Scope("t", "a", cmd["session"])
    me = os.getpid()

    def probe(phase: str, call_id: str) -> None:
        say(f"{me} {phase} {call_id}")
        if phase == cmd["pause"]:
            time.sleep(60)

    house = House(
        led,
        scope,
        default_registry(),
        Policy(mode="trusted"),
        workspace=Workspace(cmd["root"]),
        probe=probe,
        guard=unguarded,  # the writers race on purpose: the house's own guards are under test
    )
    say(f"{me} started -")
    first = int(cmd["k"])
    for i in range(first, first + (10_000 if cmd["pause"] == "burst" else 1)):
        if cmd["kind"] == "write":
            args = {"path": cmd["name"], "content": f"version {i}\n" * (i % 7 + 1)}
            tool = "Write"
        else:
            args = {"path": cmd["name"], "old_string": "END\n", "new_string": f"line-{i}\nEND\n"}
            tool = "Edit"
        tool_call = ToolCall(f"{cmd['session']}-{i}", tool, json.dumps(args))
        step = led.append(scope, [Message.assistant("", tool_call)])[0].step
        house.handle(tool_call, Actor.user("ana"), join_step=step)
    say(f"{me} done -")


def main() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed workers are reaped by the kernel
    say("ready")
    for line in sys.stdin:
        cmd = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                work(cmd)
            finally:
                os._exit(0)
        say(f"spawned {pid}")


if __name__ == "__main__":
    main()
