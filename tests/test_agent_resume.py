"""Resume after an abrupt stop (RES-1..6), the session lock (RES-2), and ``not_applied``.

A crash is simulated in process by a probe raising :class:`Crash` (a BaseException, so nothing
catches it); the SIGKILL version of the same paths is ``test_agent_crash.py``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _agent_support import Crash, Rig, crash_at, reply, rig, text, tool
from comal.agent import SessionLock, SessionLocked, lock_path, lock_session
from comal.ledger import open_ledger
from comal.messages import Message, open_calls, pairs
from comal.ops import Policy, Rule, Workspace, default_registry, may_retry, receipts, reconcile
from comal.providers import ModelRequest, ModelResponse
from comal.testing import FunctionProvider, ScriptedProvider
from comal.tokens import EstimatingCounter

EDIT = reply(tool("e1", "Edit", path="a.txt", old_string="END\n", new_string="line\nEND\n"))


def statuses(r: Rig, call_id: str) -> list[str]:
    return [x.status for x in receipts(r.ledger, r.scope) if x.call_id == call_id]


def test_a_write_prepared_but_not_landed_is_not_applied_and_runs_again(tmp_path: Path) -> None:
    # covers: RES-3, RES-4, OPS-4
    r = rig(tmp_path, probe=crash_at("prepared"))
    (r.root / "a.txt").write_text("END\n")
    with pytest.raises(Crash):
        r.agent(ScriptedProvider([EDIT])).run("add a line")
    assert r.read("a.txt") == "END\n"  # the rename never happened
    s = rig(tmp_path, db=tmp_path / "ledger.db", scope=r.scope)  # a new process
    result = s.agent(ScriptedProvider([reply(text("added"))])).resume()
    assert result.status == "finished"
    assert s.read("a.txt") == "line\nEND\n"  # applied exactly once
    assert statuses(s, "e1") == ["not_applied", "ok"]
    (rec,) = [e for e in s.ledger.records(s.scope, "event") if e.kind == "recovered"]
    assert rec.body["pending"] == ["e1"] and rec.body["blocked"] == []


def test_a_write_that_was_to_create_a_missing_file_is_not_applied(tmp_path: Path) -> None:
    # covers: RES-3
    r = rig(tmp_path, probe=crash_at("prepared"))
    with pytest.raises(Crash):
        r.agent(ScriptedProvider([reply(tool("w", "Write", path="new.txt", content="n"))])).run(
            "create it"
        )
    report = reconcile(r.ledger, r.scope, workspace=Workspace(r.root), registry=default_registry())
    assert report.status_of("w") == "not_applied" and report.pending == ("w",)
    assert may_retry(r.ledger, r.scope, "w")
    again = reconcile(r.ledger, r.scope, workspace=Workspace(r.root), registry=default_registry())
    assert again.items == () and again.pending == ("w",)  # reconciling twice writes nothing
    # A second attempt prepared and interrupted is a new preparation: it blocks insistence
    # until it is reconciled in turn.
    r.ledger.add_record(r.scope, "preparation", "write", {"call_id": "w", "path": "new.txt"})
    assert not may_retry(r.ledger, r.scope, "w")


def test_a_landed_write_is_observed_not_repeated(tmp_path: Path) -> None:
    # covers: RES-3
    r = rig(tmp_path, probe=crash_at("written"))
    (r.root / "a.txt").write_text("END\n")
    with pytest.raises(Crash):
        r.agent(ScriptedProvider([EDIT])).run("add a line")
    s = rig(tmp_path, db=tmp_path / "ledger.db", scope=r.scope)
    s.agent(ScriptedProvider([reply(text("added"))])).resume()
    assert s.read("a.txt") == "line\nEND\n"
    assert statuses(s, "e1") == ["postcondition_observed"]


def test_an_uncertain_shell_call_stays_blocked_and_the_model_is_told(tmp_path: Path) -> None:
    # covers: RES-4, OPS-4, OPS-5
    r = rig(tmp_path, probe=crash_at("prepared"))
    bash = reply(tool("b1", "Bash", command="echo once >> log.txt"))
    with pytest.raises(Crash):
        r.agent(ScriptedProvider([bash])).run("log it")
    s = rig(tmp_path, db=tmp_path / "ledger.db", scope=r.scope)
    provider = ScriptedProvider([reply(text("I will check log.txt first."))])
    result = s.agent(provider).resume()
    assert result.blocked == ("b1",)
    assert not (s.root / "log.txt").exists()  # never repeated on its own
    assert statuses(s, "b1") == ["uncertain"]
    told = provider.calls[0].messages[-1].text
    assert "uncertain after an interruption" in told and "will not be repeated" in told
    assert not may_retry(s.ledger, s.scope, "b1")


def test_regression_resumed_session_stuck_on_a_tool_call_without_a_result(
    tmp_path: Path,
) -> None:
    # covers: RES-1, LIM-4
    # Peer report (anthropics/claude-code #473): after a crash between the assistant's tool call
    # and its result, resuming sent the dangling tool_use to the API again and again, which
    # refused it. Here the call never started, so it is judged and run at resume; every request
    # afterwards has every call paired with its result.
    r = rig(tmp_path, probe=crash_at("appended"))
    (r.root / "a.txt").write_text("END\n")
    with pytest.raises(Crash):
        r.agent(ScriptedProvider([EDIT])).run("add a line")
    assert [c.id for c in open_calls(e.message for e in r.ledger.entries(r.scope))] == ["e1"]
    checked: list[ModelRequest] = []

    def answer(req: ModelRequest) -> ModelResponse | dict[str, object]:
        checked.append(req)
        assert all(p.result is not None for p in pairs(req.messages))
        return reply(text("done"))

    s = rig(tmp_path, db=tmp_path / "ledger.db", scope=r.scope)
    result = s.agent(FunctionProvider(answer)).resume()
    assert result.status == "finished" and len(checked) == 1
    assert s.read("a.txt") == "line\nEND\n"
    assert not open_calls(e.message for e in s.ledger.entries(s.scope))


def test_pending_calls_are_judged_by_the_new_process_policy(tmp_path: Path) -> None:
    # covers: RES-6, OPS-2
    r = rig(tmp_path, probe=crash_at("appended"))
    write = reply(tool("w", "Write", path="x.txt", content="x"))
    with pytest.raises(Crash):
        r.agent(ScriptedProvider([write])).run("write x")
    strict = Policy(mode="trusted", rules=(Rule("Write", "*", "deny"),))
    s = rig(tmp_path, db=tmp_path / "ledger.db", scope=r.scope, policy=strict)
    s.agent(ScriptedProvider([reply(text("it was denied"))])).resume()
    assert not (s.root / "x.txt").exists()
    assert statuses(s, "w") == ["denied"]
    (rc,) = [x for x in receipts(s.ledger, s.scope) if x.call_id == "w"]
    assert rc.judgment["rule"] == "Write(*)"


def test_a_crash_after_the_answer_finishes_without_calling_the_model(tmp_path: Path) -> None:
    # covers: RES-1, RES-5
    r = rig(tmp_path, probe=crash_at("appended"))
    with pytest.raises(Crash):
        r.agent(ScriptedProvider([reply(text("The answer."))])).run("q")
    assert r.ledger.session(r.scope).status == "active"  # type: ignore[union-attr]
    s = rig(tmp_path, db=tmp_path / "ledger.db", scope=r.scope)
    nothing = ScriptedProvider([])
    result = s.agent(nothing, settings_kw={"checks": ("true",)}).resume()
    assert (result.status, result.answer, nothing.calls) == ("finished", "The answer.", [])


def test_an_output_length_streak_survives_a_crash(tmp_path: Path) -> None:
    # covers: OUT-3, RES-1
    r = rig(tmp_path, probe=crash_at("proposed", nth=2))
    cut = reply(text("…"), stop_reason="max_tokens")
    first = ScriptedProvider([cut, cut])
    with pytest.raises(Crash):
        r.agent(first).run("long")
    s = rig(tmp_path, db=tmp_path / "ledger.db", scope=r.scope)
    again = ScriptedProvider([reply(text("short"))])
    s.agent(again).resume()
    # The resumed request carries the larger reserve: the one interrupted was the retry.
    assert again.calls[0].max_output_tokens == first.calls[1].max_output_tokens


def test_a_live_lock_refuses_and_a_dead_one_is_cleared(tmp_path: Path) -> None:
    # covers: RES-2
    db = tmp_path / "ledger.db"
    led = open_ledger(db, counter=EstimatingCounter())
    scope = led.create_session("t", "a")
    led.append(scope, [Message.user("hello")])
    with lock_session(led, scope):
        with pytest.raises(SessionLocked) as caught:
            lock_session(led, scope)
        assert caught.value.code == "SESSION_LOCKED"
        assert caught.value.holder["pid"] == os.getpid()
        assert caught.value.holder["host"] == socket.gethostname()
        assert "in use by pid" in str(caught.value)
    with lock_session(led, scope) as clean:
        assert clean.stale is None  # a clean release leaves nothing stale
    child = textwrap.dedent(
        f"""
        import os, signal
        from comal.agent import SessionLock, lock_path
        SessionLock(lock_path({str(db)!r}, {scope.session!r}), {scope.session!r}).acquire()
        print(os.getpid(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert proc.returncode == -9
    dead = int(proc.stdout.split()[0])
    with lock_session(led, scope) as lock:
        assert lock.stale is not None and lock.stale["pid"] == dead
    (event,) = [e for e in led.records(scope, "event") if e.kind == "lock_cleared"]
    assert event.body["previous"]["pid"] == dead
    assert [e.message.text for e in led.entries(scope)] == ["hello"]  # history kept
    path = lock_path(db, scope.session)
    assert path.exists() and path.read_text() == ""
    led.close()


def test_the_lock_does_not_survive_its_owner_in_the_same_host(tmp_path: Path) -> None:
    # covers: RES-2
    path = lock_path(tmp_path / "l.db", "s")
    lock = SessionLock(path, "s")
    lock.acquire()
    with pytest.raises(SessionLocked):
        SessionLock(path, "s").acquire()
    lock.release()
    lock.release()  # idempotent
    with SessionLock(path, "s") as again:
        assert again.stale is None


def test_reconcile_keeps_other_mismatches_uncertain(tmp_path: Path) -> None:
    # covers: RES-4
    r = rig(tmp_path, probe=crash_at("prepared"))
    (r.root / "a.txt").write_text("END\n")
    with pytest.raises(Crash):
        r.agent(ScriptedProvider([EDIT])).run("add a line")
    (r.root / "a.txt").write_text("someone else\n")
    report = reconcile(r.ledger, r.scope, workspace=Workspace(r.root), registry=default_registry())
    assert report.status_of("e1") == "uncertain" and report.pending == ()
    assert "differs from both" in report.items[0].reason
