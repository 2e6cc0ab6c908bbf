"""The browser task killed with SIGKILL at random points, resumed until it finishes (WEB-2/3,
RES-3/4, PLG-2).

A scripted task — ChromeOpen → ChromeFill → ChromeClick → ChromeDeploy → ChromePublish →
ChromeFinish — runs as the real command line in a worker forked by ``_chrome_kill_driver.py``;
each worker is killed at a random phase of the agent or its house (first at forced ones: a
deploy and a publish prepared but not done, done but not receipted, a click started), and the
next resumes it. After every worker: the target received at most one publish, of the right
digest; the click reached the site at most once. After each run: exactly one publish, one
deploy observed, ChromeOpen receipted once, the session finished only after ChromeFinish's
tests passed. A second loop kills workers in the middle of the recovery reads themselves.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from _agent_support import reply, text, tool
from _chrome_support import World, task_script, workspace, world, write_json, write_script
from _fork_server import Zygote
from comal.ledger import LedgerBackend, Scope, open_ledger
from comal.ops import receipts

pytest.importorskip(
    "playwright",
    reason="playwright is not installed: the chrome extra (make installs it)",
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path("/usr/bin/chromium").exists(),
        reason="Debian's chromium is not installed (apt-get install chromium; .ci/run does)",
    ),
]

DRIVER = Path(__file__).with_name("_chrome_kill_driver.py")
MIN_KILLS = 20
MAX_RUNS = 12
PAUSE_MAX = 24
FORCED = [
    "prepared publish1",  # the intent is durable, nothing sent: not_applied, run again
    "executed publish1",  # sent, not receipted: postcondition_observed, not repeated
    "prepared deploy1",
    "executed deploy1",
    "prepared click1",  # started: uncertain, never replayed
]


def _scope(led: LedgerBackend, tenant: str) -> Scope | None:
    found = [s for s in led.sessions(tenant=tenant) if s.parent is None]
    return found[0].scope if found else None


def _invariants(w: World, led: LedgerBackend, scope: Scope | None, digest: str) -> None:
    assert len(w.target.publishes) <= 1, w.target.publishes
    assert all(p == digest for p in w.target.publishes)
    assert w.site_counts.clicks <= 1  # a click is never replayed
    if scope is None:
        return
    info = led.session(scope)
    if info is not None and info.status == "finished":
        ops = [r for r in receipts(led, scope)]
        assert any(r.operation == "ChromeFinish" and r.status == "ok" for r in ops)


def _final(w: World, led: LedgerBackend, scope: Scope, digest: str) -> dict[str, Any]:
    info = led.session(scope)
    assert info is not None and info.status == "finished"
    assert w.target.publishes == [digest]  # exactly one publish, of the right digest
    found = receipts(led, scope)
    done = ("ok", "postcondition_observed")
    opens = [r for r in found if r.operation == "ChromeOpen" and r.status == "ok"]
    deploys = [r for r in found if r.operation == "ChromeDeploy" and r.status in done]
    publishes = [r for r in found if r.operation == "ChromePublish" and r.status in done]
    assert len(opens) == 1 and len(deploys) == 1 and len(publishes) == 1, found
    finish = [r for r in found if r.operation == "ChromeFinish" and r.status == "ok"]
    assert finish and finish[-1].record_id > publishes[0].record_id  # type: ignore[operator]
    clicks = [r for r in found if r.operation == "ChromeClick"]
    assert len(clicks) == 1 and w.site_counts.clicks <= 1
    return {r.status for r in found if r.operation in ("ChromePublish", "ChromeDeploy")}  # type: ignore[return-value]


def _setup(tmp: Path, tenant: str, w: World, db: Path) -> tuple[str, dict[str, str], list[str]]:
    """The run's workspace (its own page text, so its own digest), env and flags."""
    from comal.chrome._artifact import build_artifact
    from comal.ops import Workspace

    ws = workspace(tmp / tenant)
    (ws / "dist" / "index.html").write_text(f"<h1>Hello {tenant}</h1>\n")
    digest = build_artifact(Workspace(ws), "dist").digest
    config = w.settings() | {"allow": ["ChromePublish"]}
    env = {
        "COMAL_LEDGER": str(db),
        "COMAL_CONFIG": str(write_json(tmp / tenant / "config.json", config)),
        "COMAL_TENANT": tenant,
    }
    script = write_script(tmp / tenant / "task.jsonl", task_script(w.site))
    flags = ["--model", f"script:{script}", "--mode", "trusted", "--workspace", str(ws), "--json"]
    return digest, env, flags


def _argv(led: LedgerBackend, tenant: str, flags: list[str]) -> list[str]:
    scope = _scope(led, tenant)
    if scope is None:
        return ["-p", "Do the browser task.", *flags]
    return ["--resume", scope.session, "-p", *flags]


def _worker(zygote: Zygote, cmd: dict[str, Any]) -> tuple[str, str]:
    """Run one worker; kill it where it paused. (the event it reported, its exit code)"""
    pid = zygote.spawn(cmd)
    event, code = zygote.until(pid, "paused", timeout=180)
    if event != "exit":
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, code = zygote.until(pid)
    time.sleep(0.2)  # the killed worker's browser goes with it
    return (code if event == "paused" else event), code


def _loop(tmp: Path, rng: random.Random) -> dict[str, Any]:
    db = tmp / "ledger.db"
    led = open_ledger(db)
    zygote = Zygote(DRIVER, tmp / "driver.err")
    kills, runs, statuses = 0, 0, set()
    forced = list(FORCED)
    try:
        while kills < MIN_KILLS:
            assert runs < MAX_RUNS, f"too few kills land: {kills}"
            tenant = f"run{runs}"
            with world(tmp / tenant) as w:
                digest, env, flags = _setup(tmp, tenant, w, db)
                for attempt in range(60):
                    assert attempt < 59, "the run never finished"
                    cmd: dict[str, Any] = {"argv": _argv(led, tenant, flags), "env": env}
                    if forced and runs == 0:
                        cmd["pause_on"] = forced.pop(0)
                    elif rng.random() < 0.95:
                        cmd["pause_at"] = rng.randint(1, PAUSE_MAX)
                    _, code = _worker(zygote, cmd)
                    scope = _scope(led, tenant)
                    _invariants(w, led, scope, digest)
                    if code == f"-{signal.SIGKILL}":
                        kills += 1
                        continue
                    assert code == "0", (code, cmd)
                    assert scope is not None
                    if led.session(scope).status == "finished":  # type: ignore[union-attr]
                        break
                assert scope is not None
                statuses |= _final(w, led, scope, digest)
                runs += 1
    finally:
        zygote.close()
        led.close()
    return {"kills": kills, "runs": runs, "statuses": statuses}


def test_sigkill_anywhere_in_the_browser_task_publishes_exactly_once(tmp_path: Path) -> None:
    # covers: WEB-2, WEB-3, RES-3, RES-4, PLG-2
    seen = _loop(tmp_path, random.Random(20261202))
    print("kills:", seen)
    assert seen["kills"] >= MIN_KILLS
    # Both recovery paths of the intent were taken: proven not sent, and observed sent.
    assert {"postcondition_observed", "not_applied"} <= seen["statuses"], seen


def test_sigkill_during_the_recovery_reads_repeats_only_those_reads(tmp_path: Path) -> None:
    # covers: WEB-2, WEB-3, PLG-2
    rng = random.Random(20261203)
    db = tmp_path / "ledger.db"
    led = open_ledger(db)
    zygote = Zygote(DRIVER, tmp_path / "driver.err")
    recover_kills, runs = 0, 0
    try:
        while recover_kills < MIN_KILLS:
            assert runs < MAX_RUNS
            tenant = f"run{runs}"
            with world(tmp_path / tenant) as w:
                digest, env, flags = _setup(tmp_path, tenant, w, db)
                # An orphan publish: its intent durable, sent or not.
                where = rng.choice(["prepared publish1", "executed publish1"])
                cmd: dict[str, Any] = {"argv": _argv(led, tenant, flags), "env": env}
                _worker(zygote, cmd | {"pause_on": where})
                sent = len(w.target.publishes)
                assert sent == (1 if where.startswith("executed") else 0)
                # Then killed again and again in the middle of the reads that reconcile it.
                scope = _scope(led, tenant)
                assert scope is not None
                turns = len(led.entries(scope))
                for _ in range(rng.randint(3, 6)):
                    reads = w.target.reads
                    when = rng.choice(["before", "after"])
                    pause = env | {"CHROME_PAUSE_RECOVER": when}
                    event, code = _worker(zygote, {"argv": _argv(led, tenant, flags), "env": pause})
                    assert code == f"-{signal.SIGKILL}", (event, code)
                    recover_kills += 1
                    # Nothing but the known read happened: no publish, no receipt for it yet.
                    assert len(w.target.publishes) == sent
                    assert w.target.reads == reads + (when == "after")
                    assert not [r for r in receipts(led, scope) if r.operation == "ChromePublish"]
                    # Reconciled before any model call: the conversation did not move.
                    assert len(led.entries(scope)) == turns
                    _invariants(w, led, scope, digest)
                _, code = _worker(zygote, {"argv": _argv(led, tenant, flags), "env": env})
                assert code == "0"
                scope = _scope(led, tenant)
                assert scope is not None
                _final(w, led, scope, digest)
                runs += 1
    finally:
        zygote.close()
        led.close()
    print("recover kills:", recover_kills, "runs:", runs)


def test_another_publisher_first_leaves_the_orphan_publish_blocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: WEB-2, RES-4, PLG-2
    db = tmp_path / "ledger.db"
    led = open_ledger(db)
    zygote = Zygote(DRIVER, tmp_path / "driver.err")
    try:
        with world(tmp_path / "t") as w:
            digest, env, flags = _setup(tmp_path, "t", w, db)
            script = tmp_path / "t" / "task.jsonl"
            steps = task_script(w.site)
            # After the resume the model insists, then gives up and says so.
            steps[5:] = [
                reply(tool("publish2", "ChromePublish")),
                reply(text("The publish is blocked; a human has to look at the target.")),
                reply(text("Still blocked.")),
                reply(text("Still blocked.")),
            ]
            write_script(script, steps)
            _worker(zygote, {"argv": _argv(led, tenant="t", flags=flags), "env": env,
                             "pause_on": "prepared publish1"})  # fmt: skip
            assert w.target.publishes == []
            # Another publisher gets there first.
            w.target.body = b"someone else's bytes"
            _worker(zygote, {"argv": _argv(led, "t", flags), "env": env})
            scope = _scope(led, "t")
            assert scope is not None
            found = {r.call_id: r for r in receipts(led, scope)}
            first = found["publish1"]
            assert first.status == "uncertain" and first.disposition == "basket"
            assert "another publisher" in first.observations["reason"]
            assert found["publish2"].status == "error"
            assert found["publish2"].observations["error"] == "CHROME_PUBLISH_BLOCKED"
            results = {
                e.message.tool_result.call_id: e.message.tool_result.text
                for e in led.entries(scope)
                if e.message.tool_result is not None
            }
            assert "stays blocked" in str(results["publish1"])
            assert w.target.publishes == []  # nothing of ours went out
            assert led.session(scope).status != "finished"  # type: ignore[union-attr]
            # A human can: the operator publishes from the command line, judged and receipted.
            from typer.testing import CliRunner

            from comal.cli import app

            for key, value in env.items():
                monkeypatch.setenv(key, value)
            out = CliRunner().invoke(app, ["call", scope.session, "ChromePublish", "{}", "--json"])
            assert out.exit_code == 0, out.output
            assert w.target.publishes == [digest]
    finally:
        zygote.close()
        led.close()
