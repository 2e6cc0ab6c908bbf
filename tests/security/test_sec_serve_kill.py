"""Issue 18: ``comal serve`` SIGKILLed at random points while 8 clients hold conversations.

The probe found that a kill landing after a reply was recorded and before it was delivered made
the client's identical retry read as a rewind: a child session with the whole history copied
(``fork_at``), and the reply stored twice (119 acknowledged replies of 20 kills). Here a real
``comal serve`` (forked from a driver that imported it once, :mod:`_serve_kill_driver`) runs
in front of a FakeServer; 8 clients talk through the official SDKs in every wire format,
whole and streamed, and retry whatever failed with the same request. The server is killed at
least 20 times, every other time right between "recorded" and "delivered" (the driver's probe
holds the reply there), otherwise at a random moment, and restarted on the same port.

Afterwards: one session per client and no child (no ``fork_at``), each client's acknowledged
replies stored in its session exactly once and in order (nothing stored twice, nothing stored
the client never got), every kill between recorded and delivered answered by a recognised
retry, and ``comal verify`` clean.

# covers: LED-1, LED-3, INT-2
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from typer.testing import CliRunner

from _fork_server import Zygote
from comal.cli import app
from comal.ledger import open_ledger
from comal.serve import REPLAY_EVENT
from comal.serve._run import free_port
from comal.testing import FakeServer
from serve._conversations import BROKEN, FORMATS, Talk, client_for, said, script_entry

DRIVER = Path(__file__).with_name("_serve_kill_driver.py")
CLIENTS = 8
KILLS = 22
SCRIPT = 3_000  # upstream replies: more than the clients can use in the test's time
BOUND_S = 150  # the whole test's bound: a hang fails it instead of stalling the suite


def _listening(port: int, pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise AssertionError(f"comal serve {pid} ended before it listened") from None
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.01)
    raise AssertionError(f"comal serve {pid} did not listen on {port}")


@dataclass
class Client:
    """One conversation, retrying a failed call with the same request until it is answered."""

    talk: Talk
    acked: list[str] = field(default_factory=list)
    failures: int = 0
    error: BaseException | None = None

    def run(self, stop: threading.Event, deadline: float, rng: random.Random) -> None:
        try:
            while not stop.is_set():
                while True:  # one turn: the same request until it is answered
                    assert time.monotonic() < deadline, f"{self.talk.name} got no answer"
                    try:
                        reply = self.talk.send()
                        break
                    except BROKEN:
                        self.failures += 1
                        time.sleep(rng.uniform(0.03, 0.1))
                self.acked.append(reply.text)
                self.talk.accept(reply)
        except BaseException as exc:  # reported by the test
            self.error = exc


def test_sigkill_anywhere_then_retries_store_every_reply_once(tmp_path: Path) -> None:
    rng = random.Random(18)
    deadline = time.monotonic() + BOUND_S
    ledger_path = tmp_path / "ledger.db"
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMAL_")}
    env["HOME"] = str(home)
    script = [script_entry(k, tool=k % 3 == 1) for k in range(SCRIPT)]
    port = free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    kills = paused_kills = 0
    with FakeServer(script) as fake:
        argv = ["serve", "--ledger", str(ledger_path), "--port", str(port), "--no-dashboard"]
        argv += ["--upstream-anthropic", fake.anthropic_base_url]
        argv += ["--upstream-openai", fake.openai_base_url]
        zygote = Zygote(DRIVER, tmp_path / "driver.err", env)
        stop = threading.Event()
        clients = []
        for k in range(CLIENTS):
            protocol, stream = FORMATS[k % len(FORMATS)]
            talk = Talk(client_for(protocol, url, timeout=10.0), protocol, stream, f"client-{k}")
            clients.append(Client(talk))
        threads = [
            threading.Thread(target=c.run, args=(stop, deadline, random.Random(k)), daemon=True)
            for k, c in enumerate(clients)
        ]
        try:
            started = False
            while kills < KILLS:
                # Every other run is held right after a reply is recorded, before delivery.
                pause = rng.randint(1, 4) if kills % 2 == 0 else None
                pid = zygote.spawn({"argv": argv, "pause_at": pause})
                _listening(port, pid)
                if not started:
                    for t in threads:
                        t.start()
                    started = True
                if pause is not None:
                    held, _ = zygote.until(pid, "paused", timeout=20)
                    assert held == "paused", f"run {kills}: {held}"
                    paused_kills += 1
                else:
                    time.sleep(rng.uniform(0.05, 0.6))
                os.kill(pid, signal.SIGKILL)
                assert zygote.until(pid, "never", timeout=30) == ("exit", str(-signal.SIGKILL))
                kills += 1
            # A last run the clients finish their turns on, then stops cleanly.
            pid = zygote.spawn({"argv": argv, "pause_at": None})
            _listening(port, pid)
            time.sleep(0.5)
            stop.set()
            for t in threads:
                t.join(max(1.0, deadline - time.monotonic()))
            os.kill(pid, signal.SIGTERM)
            assert zygote.until(pid, "never", timeout=30)[0] == "exit"
        finally:
            stop.set()
            zygote.close()
            for c in clients:
                c.talk.client.close()
        upstream_calls = len(fake.requests)
    for c in clients:
        assert c.error is None, (c.talk.name, c.error)
    retried = sum(c.failures for c in clients)
    acked = sum(len(c.acked) for c in clients)

    led = open_ledger(ledger_path)
    try:
        sessions = led.sessions()
        # No fork: one session per client, none a child of another.
        forks = [s.id for s in sessions if s.parent is not None or "fork_at" in s.meta]
        assert forks == []
        assert len(sessions) == CLIENTS
        stored_all: list[str] = []
        replays = 0
        for c in clients:
            (info,) = [
                s
                for s in sessions
                if any(said(e.message) == f"{c.talk.name}: begin" for e in led.entries(s.scope))
            ]
            stored = [said(e.message) for e in led.entries(info.scope) if e.role == "assistant"]
            # Every acknowledged reply stored once, in order, and nothing else stored.
            assert stored == c.acked, c.talk.name
            stored_all += stored
            replays += len(led.records(info.scope, "event", kinds=(REPLAY_EVENT,)))
        duplicates = sum(n - 1 for n in Counter(stored_all).values())
        assert duplicates == 0
        # Each run held between recorded and delivered was answered by a recognised retry.
        assert replays >= paused_kills > 0
    finally:
        led.close()
    result = CliRunner().invoke(app, ["--ledger", str(ledger_path), "verify", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True
    assert kills >= 20
    print(
        f"\nkills={kills} (between recorded and delivered: {paused_kills}) "
        f"replies acknowledged={acked} upstream calls={upstream_calls} "
        f"client retries={retried} retries recognised={replays} "
        f"duplicates={duplicates} forks={len(forks)}"
    )
