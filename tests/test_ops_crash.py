"""Durable preparations and reconciliation after an abrupt stop (RES-3, RES-4, OPS-4)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from _ops_support import ANA, call, make_setup, propose
from comal.ledger import Scope, SQLiteLedger, open_ledger, verify
from comal.messages import Message, ToolCall
from comal.ops import (
    CallContext,
    Effect,
    Operation,
    ToolOutput,
    Workspace,
    default_registry,
    may_retry,
    receipts,
    reconcile,
)
from comal.tokens import EstimatingCounter

WRITER = Path(__file__).with_name("_ops_crash_writer.py")
LANES = 8
ROUNDS = 5


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Zygote:
    """The writer process; every worker it forks is a process of its own, killed by SIGKILL."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.seen: list[tuple[int, str, str]] = []
        assert self._line() == "ready"

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the writer died"
        return line.strip()

    def spawn(
        self, db: Path, session: str, root: Path, name: str, kind: str, k: int, pause: str
    ) -> int:
        cmd = {
            "db": str(db),
            "session": session,
            "root": str(root),
            "name": name,
            "kind": kind,
            "k": k,
            "pause": pause,
        }
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        while True:
            line = self._line()
            if line.startswith("spawned "):
                return int(line.split()[1])
            self._note(line)

    def _note(self, line: str) -> None:
        pid, phase, call_id = line.split(" ", 2)
        self.seen.append((int(pid), phase, call_id))

    def wait_for(self, pid: int, phase: str) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for seen_pid, seen_phase, call_id in self.seen:
                if (seen_pid, seen_phase) == (pid, phase):
                    return call_id
                assert (seen_pid, seen_phase) != (pid, "done"), f"{pid} finished before {phase}"
            self._note(self._line())
        raise AssertionError(f"worker {pid} never reached {phase}")

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.002)  # gone once the kernel has reaped it (SIGCHLD is ignored)


def lines_of(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("line-")]


def test_sigkill_between_write_and_receipt_reconciles_without_a_second_write(
    tmp_path: Path,
) -> None:
    # covers: RES-3, RES-4, OPS-4, OPS-5
    db = tmp_path / "ledger.db"
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root)
    registry = default_registry()
    led = open_ledger(db, counter=EstimatingCounter())
    zygote = Zygote()
    lanes: list[tuple[Scope, str, str]] = []
    for lane in range(LANES):
        scope = led.create_session("t", "a", session_id=f"lane{lane}")
        kind = "edit" if lane % 2 else "write"
        (root / f"f{lane}.txt").write_text("start\nEND\n")
        lanes.append((scope, f"f{lane}.txt", kind))
    kills = {"written": 0, "prepared": 0}
    for rnd in range(ROUNDS):
        running = []
        for lane, (scope, name, kind) in enumerate(lanes):
            pause = "prepared" if (rnd + lane) % 4 == 0 else "written"
            running.append(
                (lane, pause, zygote.spawn(db, scope.session, root, name, kind, rnd, pause))
            )
        for lane, pause, pid in running:
            call_id = zygote.wait_for(pid, pause)
            kill(pid)
            kills[pause] += 1
            scope, name, kind = lanes[lane]
            path = root / name
            before = sha(path)
            report = reconcile(led, scope, workspace=ws, registry=registry)
            assert sha(path) == before  # reconciling never writes
            assert [i.call_id for i in report.items] == [call_id]
            prep = next(
                p for p in led.records(scope, "preparation") if p.body["call_id"] == call_id
            )
            if pause == "written":
                assert report.items[0].status == "postcondition_observed"
                assert before == prep.body["intended_digest"]
                assert not may_retry(led, scope, call_id)
            else:
                # The old bytes prove the atomic rename never happened: not_applied, pending.
                assert report.items[0].status == "not_applied"
                assert report.pending == (call_id,)
                assert before == prep.body["digest_before"] != prep.body["intended_digest"]
                assert may_retry(led, scope, call_id)
            assert [r.call_id for r in receipts(led, scope)].count(call_id) == 1
            again = reconcile(led, scope, workspace=ws, registry=registry)
            assert again.items == () and again.pending == report.pending
            if pause == "prepared":
                # Close the call as a harness would after judging it afresh: a new proposal
                # follows in the next round, so this step must not stay open.
                led.append(
                    scope,
                    [Message.tool(call_id, "[not run again in this test]")],
                    join_step=led.heads(scope)[-1].step,
                )
    zygote.close()
    assert kills["written"] >= 30
    for lane, (_, name, kind) in enumerate(lanes):
        if kind == "edit":
            # Inserted exactly once where observed, never where uncertain.
            expected = [f"line-{r}" for r in range(ROUNDS) if (r + lane) % 4 != 0]
            assert lines_of(root / name) == expected
    report = verify(led)
    assert report.ok, report.faults
    led.close()


def test_random_kills_never_duplicate_a_write(tmp_path: Path) -> None:
    # covers: RES-3, RES-4
    db = tmp_path / "ledger.db"
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root)
    led = open_ledger(db, counter=EstimatingCounter())
    rng = random.Random(7)
    zygote = Zygote()
    outcomes: list[str] = []
    for lane in range(LANES):
        scope = led.create_session("t", "a", session_id=f"burst{lane}")
        path = root / f"b{lane}.txt"
        path.write_text("END\n")
        pid = zygote.spawn(db, scope.session, root, path.name, "edit", 0, "burst")
        zygote.wait_for(pid, "started")
        time.sleep(rng.uniform(0.01, 0.3))
        kill(pid)
        report = reconcile(led, scope, workspace=ws, registry=default_registry())
        assert len({i.call_id for i in report.items} | set(report.pending)) <= 1
        for item in report.items:
            prep = next(p for p in led.records(scope, "preparation") if p.id == item.preparation)
            observed = sha(path) == prep.body["intended_digest"]
            assert (item.status == "postcondition_observed") == observed
        done = sorted(
            int(r.call_id.rsplit("-", 1)[1])
            for r in receipts(led, scope)
            if r.status in ("ok", "postcondition_observed")
        )
        assert lines_of(path) == [f"line-{i}" for i in done]  # each exactly once, in order
        outcomes.extend(i.status for i in report.items)
    zygote.close()
    print("random kills reconciled:", outcomes)
    led.close()


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs."""


def crash_at(phase: str):  # type: ignore[no-untyped-def]
    def probe(at: str, call_id: str) -> None:
        if at == phase:
            raise Crash(call_id)

    return probe


def test_uncertain_cases_block_insistence(tmp_path: Path) -> None:
    # covers: RES-4, OPS-4, OPS-5
    s = make_setup(tmp_path, probe=crash_at("prepared"))
    (s.root / "gone.txt").write_text("old\n")
    (s.root / "other.txt").write_text("old\n")
    (s.root / "dir.txt").write_text("old\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    (s.root / "moved.txt").write_text("old\n")
    cases = {
        "bash": call("Bash", {"command": "touch x"}),
        "other": call("Write", {"path": "other.txt", "content": "new\n"}),
        "dir": call("Write", {"path": "dir.txt", "content": "new\n"}),
        "moved": call("Write", {"path": "moved.txt", "content": "new\n"}),
    }
    for tool_call in cases.values():
        with pytest.raises(Crash):
            propose(s, tool_call)
    (s.root / "other.txt").write_text("someone else\n")  # a different file after the crash
    (s.root / "dir.txt").unlink()
    (s.root / "dir.txt").mkdir()  # unreadable as a file
    (s.root / "moved.txt").unlink()
    (s.root / "moved.txt").symlink_to(tmp_path / "secret.txt")  # the read would be denied
    report = reconcile(s.ledger, s.scope, workspace=Workspace(s.root), registry=default_registry())
    by_call = {i.call_id: i for i in report.items}
    assert {i.status for i in report.items} == {"uncertain"}
    assert "no postcondition adapter" in by_call[cases["bash"].id].reason
    assert "differs from both" in by_call[cases["other"].id].reason
    assert "could not be read" in by_call[cases["dir"].id].reason
    assert "read was denied" in by_call[cases["moved"].id].reason
    for tool_call in cases.values():
        verdict = may_retry(s.ledger, s.scope, tool_call.id)
        assert not verdict and "uncertain" in verdict.reason
    stored = {r.call_id: r for r in receipts(s.ledger, s.scope)}
    assert stored[cases["bash"].id].observations["effects"] == "unknown"
    assert all(stored[c.id].disposition == "basket" for c in cases.values())
    s.close()


def test_postcondition_observed_does_not_claim_the_handler_returned(tmp_path: Path) -> None:
    # covers: RES-3
    s = make_setup(tmp_path, probe=crash_at("written"))
    tool_call = call("Write", {"path": "a.txt", "content": "done\n"})
    with pytest.raises(Crash):
        propose(s, tool_call)
    report = reconcile(s.ledger, s.scope, workspace=Workspace(s.root))
    assert report.status_of(tool_call.id) == "postcondition_observed"
    result = s.ledger.entry_by_call(s.scope, tool_call.id)
    assert result is not None and result.message.tool_result is not None
    text = result.message.tool_result.text
    assert "does not say the original handler returned, nor who wrote these bytes" in text
    receipt = next(r for r in receipts(s.ledger, s.scope) if r.call_id == tool_call.id)
    assert receipt.output is None  # no handler output is claimed
    assert receipt.judgment["rule"] == "mode:trusted"  # the judgment made before the crash
    assert receipt.disposition == "serve" and not may_retry(s.ledger, s.scope, tool_call.id)
    assert verify(s.ledger).ok
    s.close()


def open_write(led: SQLiteLedger, scope: Scope) -> ToolCall:
    tool_call = ToolCall("imp-1", "Write", '{"path": "a.txt", "content": "x"}')
    led.append(scope, [Message.user("write it")])
    led.append(scope, [Message.assistant("", tool_call)])
    return tool_call


def test_write_without_preparation(tmp_path: Path) -> None:
    # covers: RES-4, RES-1
    led = open_ledger(tmp_path / "l.db", counter=EstimatingCounter())
    (tmp_path / "ws").mkdir()
    ws = Workspace(tmp_path / "ws")
    imported = led.create_session("t", "a", source="claude-code")
    tool_call = open_write(led, imported)
    report = reconcile(led, imported, workspace=ws, registry=default_registry())
    assert report.status_of(tool_call.id) == "uncertain"
    assert "without a durable preparation" in report.items[0].reason
    assert not may_retry(led, imported, tool_call.id)
    native = led.create_session("t", "a")
    tool_call = open_write(led, native)
    report = reconcile(led, native, workspace=ws, registry=default_registry())
    assert report.items == () and report.pending == (tool_call.id,)
    assert may_retry(led, native, tool_call.id)  # this house never started it
    led.close()


def test_denied_and_read_only_calls_may_be_proposed_again(tmp_path: Path) -> None:
    # covers: OPS-4
    s = make_setup(tmp_path)
    (s.root / "a.txt").write_text("a\n")
    _, read = propose(s, call("Read", {"path": "a.txt"}))
    _, denied = propose(s, call("Read", {"path": "../x"}))
    _, wrote = propose(s, call("Write", {"path": "b.txt", "content": "b"}))
    assert may_retry(s.ledger, s.scope, read.call_id)
    assert may_retry(s.ledger, s.scope, denied.call_id)
    verdict = may_retry(s.ledger, s.scope, wrote.call_id)
    assert not verdict and "repeat its effects" in verdict.reason
    assert ANA.human
    s.close()


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def explode(args: NoArgs, ctx: CallContext) -> ToolOutput:
    raise RuntimeError("half way")


def test_a_handler_failing_after_it_started_is_uncertain(tmp_path: Path) -> None:
    # covers: OPS-4, RES-4
    registry = default_registry()
    registry.add(Operation("Deploy", "deploy", NoArgs, explode, effects=(Effect("publish"),)))
    registry.add(Operation("Peek", "peek", NoArgs, explode, effects=(Effect("read"),)))
    s = make_setup(tmp_path, registry=registry)
    outcome, deploy = propose(s, call("Deploy", {}))
    assert (deploy.status, deploy.disposition) == ("uncertain", "basket")
    assert "RuntimeError: half way" in outcome.result.text
    assert not may_retry(s.ledger, s.scope, deploy.call_id)
    _, peek = propose(s, call("Peek", {}))
    assert (peek.status, peek.disposition) == ("error", "serve")
    assert may_retry(s.ledger, s.scope, peek.call_id)
    s.close()
