"""Issue 9's probe classes as one measurement: ``python tests/security/probe.py``.

It uses only the house's oldest public API (``House``, ``Policy``, ``Workspace``,
``default_registry``), so it runs unchanged against a checkout from before the fix
(``PYTHONPATH=<old>/src python tests/security/probe.py``) and prints, per class, how many
cases were tried and how many held. Risky cases (memory, hangs) run in a child process with a
memory limit and a deadline, so the old code cannot hurt the machine. Not collected by pytest.
"""

from __future__ import annotations

import fcntl
import json
import multiprocessing as mp
import os
import resource
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from comal.ledger import open_ledger
from comal.messages import ToolCall
from comal.ops import Actor, House, Policy, Workspace, default_registry, unguarded

ANA = Actor.user("ana")
_n = 0


def house(tmp: Path, config: dict[str, Any], ledger: Path | None = None) -> tuple[House, Path]:
    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    led = open_ledger(ledger or tmp / "ledger.db")
    scope = led.create_session("t", "a")
    policy = Policy.from_config(config)
    house = House(
        led, scope, default_registry(), policy, workspace=Workspace(ws), guard=unguarded
    )  # the probe is the session's only writer
    return house, ws


def run(h: House, name: str, args: dict[str, Any], surface: str = "cli") -> tuple[str, str]:
    global _n
    _n += 1
    c = ToolCall(f"c{_n}", name, json.dumps(args))
    outcome = h.run(c, ANA, surface=surface)  # type: ignore[arg-type]
    h.record(outcome, append_result=False)
    return outcome.receipt.status, outcome.result.text


def guarded(fn: Callable[[], bool], seconds: float = 20.0, mem: int = 2 << 30) -> bool:
    """``fn()`` in a child with a memory limit and a deadline; a crash or hang is False."""

    def child(q: Any) -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        try:
            q.put(bool(fn()))
        except BaseException as exc:
            q.put(f"{type(exc).__name__}")

    q: Any = mp.get_context("fork").Queue()
    p = mp.get_context("fork").Process(target=child, args=(q,))
    p.start()
    p.join(seconds)
    if p.is_alive():
        p.kill()
        p.join()
        return False
    return q.get() is True if not q.empty() else False


def race(kind: str, n: int = 300) -> tuple[int, int]:
    tmp = Path(tempfile.mkdtemp())
    h, ws = house(tmp, {"mode": "trusted"})
    out = tmp / "outside"
    out.mkdir()
    (out / "f.txt").write_text("SECRET\n")
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("inside\n")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            try:
                os.rename(ws / "d", ws / "d.real")
                os.symlink(out, ws / "d")
                time.sleep(0.0005)  # hold each state long enough for a call to meet it
                os.unlink(ws / "d")
                os.rename(ws / "d.real", ws / "d")
                time.sleep(0.0005)
            except OSError:
                pass

    t = threading.Thread(target=swap, daemon=True)
    t.start()
    held = 0
    for i in range(n):
        try:
            if kind == "read":
                _, text = run(h, "Read", {"path": "d/f.txt"})
                held += "SECRET" not in text
            else:
                run(h, "Write", {"path": f"d/n{i % 5}.txt", "content": "x"})
                landed = [p for p in out.iterdir() if p.name != "f.txt"]
                held += not landed
                for p in landed:  # count each call's escape on its own
                    p.unlink()
        except Exception:
            pass
    stop.set()
    t.join()
    return n, held


def planted() -> bool:
    tmp = Path(tempfile.mkdtemp())
    h, ws = house(tmp, {"mode": "trusted"})
    (tmp / "victim").write_text("keep")
    os.symlink(tmp / "victim", ws / f".f.txt.comal-{os.getpid()}.tmp")
    try:
        run(h, "Write", {"path": "f.txt", "content": "x"})
    except Exception:
        return False
    return (tmp / "victim").read_text() == "keep"


def loop(tool: str) -> bool:
    tmp = Path(tempfile.mkdtemp())
    h, ws = house(tmp, {"mode": "trusted"})
    os.symlink("a", ws / "b")
    os.symlink("b", ws / "a")
    args: dict[str, dict[str, Any]] = {
        "Read": {"path": "a"},
        "Write": {"path": "a", "content": "x"},
        "Grep": {"pattern": "x"},
    }
    try:
        run(h, tool, args[tool])
    except Exception:
        return False
    return True


def fifo_grep() -> bool:
    tmp = Path(tempfile.mkdtemp())
    h, ws = house(tmp, {"mode": "trusted"})
    os.mkfifo(ws / "p")
    run(h, "Grep", {"pattern": "x"})
    return True


def sparse() -> bool:
    tmp = Path(tempfile.mkdtemp())
    h, ws = house(tmp, {"mode": "trusted"})
    with open(ws / "big.log", "wb") as fh:
        fh.write(b"first line\n" * 2000)
        fh.truncate(3 << 30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    status, text = run(h, "Read", {"path": "big.log", "limit": 1})
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    return status == "ok" and "first line" in text and grown < 256 << 20


DENY = [
    "/bin/rm x", "command rm x", "\\rm x", "r''m x", "env rm x", "ls | xargs rm",
    "find . -delete", "sudo rm x", "bash -c 'rm x'", "eval rm x", "find . -exec rm {} ;",
]  # fmt: skip
ALLOW = [
    "echo x > f", "echo <(cat /etc/passwd)", "echo x >(cat)", "echo $(id)",
    "echo x >> .comal/config.json", "git -c alias.x='!sh' x", "git config alias.x '!sh'",
    "git log > out",
]  # fmt: skip


def rules() -> tuple[int, int, int, int]:
    tmp = Path(tempfile.mkdtemp())
    h, _ = house(
        tmp, {"mode": "ask", "allow": ["Bash(echo *)", "Bash(git *)"], "deny": ["Bash(rm *)"]}
    )

    def rule(cmd: str) -> tuple[str, str]:
        d = h.judge.judge(ToolCall("x", "Bash", json.dumps({"command": cmd})), ANA).decision
        return d.action, d.rule

    deny_held = sum(rule(c) == ("deny", "Bash(rm *)") for c in DENY)
    allow_held = sum(rule(c)[0] != "allow" for c in ALLOW)
    return len(DENY), deny_held, len(ALLOW), allow_held


def matrix() -> dict[str, bool]:
    """Trusted mode, default policy: True where the attack was refused."""
    tmp = Path(tempfile.mkdtemp())
    elsewhere = Path("/var/tmp") / f"comal-probe-{uuid.uuid4().hex}"
    elsewhere.mkdir()
    (tmp / "ws" / ".comal").mkdir(parents=True)
    conf = tmp / "ws" / ".comal" / "config.json"
    conf.write_text("{}")
    os.environ["COMAL_CONFIG"] = str(conf)
    h, ws = house(tmp, {"mode": "trusted"}, ledger=tmp / "ws" / ".comal" / "ledger.db")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    got: dict[str, bool] = {}
    run(h, "Bash", {"command": f"echo x > {elsewhere}/pwned"})
    got["write-outside"] = not (elsewhere / "pwned").exists()
    run(h, "Bash", {"command": 'echo \'{"mode": "trusted"}\' > .comal/config.json'})
    got["write-config"] = conf.read_text() == "{}"
    _, text = run(h, "Bash", {"command": "head -c 15 .comal/ledger.db"})
    got["read-ledger"] = "SQLite format" not in text
    _, text = run(h, "Bash", {"command": f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"})
    got["open-socket"] = "connected" not in text
    run(
        h,
        "Bash",
        {
            "command": "setsid bash -c 'exec 9>>d.lock; flock 9; touch d.ok; sleep 60' "
            ">/dev/null 2>&1 </dev/null & while [ ! -e d.ok ]; do sleep 0.01; done"
        },
    )
    got["leave-daemon"] = released(ws / "d.lock")
    server.close()
    shutil.rmtree(elsewhere, ignore_errors=True)
    return got


def released(lock: Path, seconds: float = 3.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with open(lock, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                time.sleep(0.05)
    return False


def yes() -> bool:
    tmp = Path(tempfile.mkdtemp())
    h, _ = house(tmp, {"mode": "trusted"})
    status, _ = run(h, "Bash", {"command": "yes", "timeout": 1})
    return status == "timeout"


def closed_stdout() -> bool:
    tmp = Path(tempfile.mkdtemp())
    h, _ = house(tmp, {"mode": "trusted"})
    status, _ = run(h, "Bash", {"command": "exec >&- 2>&-; sleep 8", "timeout": 1})
    return status == "timeout"


SURVIVE = {
    "background": "bash -c '{x}' &",
    "nohup": "nohup bash -c '{x}' >/dev/null 2>&1 &",
    "double-fork": "( ( bash -c '{x}' & ) & )",
    "setsid": "setsid bash -c '{x}' >/dev/null 2>&1 </dev/null &",
}


def survivor(kind: str) -> bool:
    tmp = Path(tempfile.mkdtemp())
    h, ws = house(tmp, {"mode": "trusted"})
    inner = "exec 9>>s.lock; flock 9; touch s.ok; sleep 60"
    cmd = SURVIVE[kind].format(x=inner) + "\nwhile [ ! -e s.ok ]; do sleep 0.01; done"
    run(h, "Bash", {"command": cmd})
    return released(ws / "s.lock")


def regex(tool: str) -> bool:
    tmp = Path(tempfile.mkdtemp())
    h, ws = house(tmp, {"mode": "trusted"})
    (ws / "bait.txt").write_text("a" * 41 + "!\n")
    if tool == "Grep":
        run(h, "Grep", {"pattern": "(a+)+$"})
        return True
    from comal.evidence import read_evidence
    from comal.messages import Message

    c = ToolCall("r", "Read", json.dumps({"path": "bait.txt"}))
    step = h.ledger.append(h.scope, [Message.assistant("", c)])[0].step
    _, receipt = h.handle(c, ANA, join_step=step)
    assert receipt.result_entry is not None
    read_evidence(h.ledger, h.scope, receipt.result_entry, search="(a+)+$", regex=True)
    return True


def main() -> None:
    rows: list[tuple[str, int, int]] = []
    for kind in ("read", "write"):
        n, held = race(kind, int(os.environ.get("PROBE_RACE_CALLS", "1000")))
        rows.append((f"1 symlink-swap race, {kind} (calls)", n, held))
    rows.append(("1 planted symlink at the temp file", 1, int(planted())))
    loops = sum(loop(t) for t in ("Read", "Write", "Grep"))
    rows.append(("1 symlink loop (Read, Write, Grep)", 3, loops))
    rows.append(("1 FIFO in Grep's walk", 1, int(guarded(fifo_grep, 10))))
    rows.append(("1 sparse 3 GiB file, Read limit=1", 1, int(guarded(sparse, 60))))
    nd, dh, na, ah = rules()
    rows.append(("2 deny Bash(rm *) bypasses", nd, dh))
    rows.append(("2 allow Bash(echo *)/Bash(git *) bypasses", na, ah))
    m = matrix()
    rows.append(("2 sandbox matrix, default policy", len(m), sum(m.values())))
    rows.append(("3 yes for 1 s", 1, int(guarded(yes, 60))))
    rows.append(("3 closed-stdout shell, 1 s timeout", 1, int(guarded(closed_stdout, 6))))
    rows.append(("3 background survivors", len(SURVIVE), sum(survivor(k) for k in SURVIVE)))
    patterns = sum(guarded(lambda t=t: regex(t), 10) for t in ("Grep", "EvidenceRead"))
    rows.append(("3 catastrophic regex (Grep, EvidenceRead)", 2, patterns))
    width = max(len(r[0]) for r in rows)
    for name, tried, held in rows:
        print(f"{name:<{width}}  tried {tried:>4}  held {held:>4}")


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    main()
