"""Issue 9 §3: Bash's work is bounded — its memory, its time, and its processes.

A process still alive after the call is detected by the lock it holds on a file in the
workspace (visible across the sandbox's PID namespace); the lock is released only when the last
process holding it is gone.
"""

# covers: OPS-5, EVI-4, RES-4

from __future__ import annotations

import fcntl
import resource
import time
from pathlib import Path

import pytest

from _ops_support import ANA, Setup, call, make_setup
from comal.ops import Policy, Receipt, SandboxStatus, Spool, read_output


def holder(lock: Path, how: str) -> str:
    """Start a process that holds ``lock`` for ten minutes, launched ``how``, and wait until
    it holds it."""
    inner = f"exec 9>>{lock}; flock -x 9; echo held >> {lock}.ready; exec sleep 600"
    launch = {
        "background": f"bash -c '{inner}' &",
        "nohup": f"nohup bash -c '{inner}' >/dev/null 2>&1 &",
        "double-fork": f"( ( bash -c '{inner}' & ) & )",
        "setsid": f"setsid bash -c '{inner}' >/dev/null 2>&1 < /dev/null &",
        "setsid-clean-env": f"env -i PATH=$PATH setsid bash -c '{inner}' >/dev/null 2>&1 &",
        "disown": f"bash -c '{inner}' & disown",
    }[how]
    wait = f"for _ in $(seq 500); do [ -s {lock}.ready ] && break; sleep 0.01; done"
    return f"{launch}\n{wait}; echo launched"


def held(lock: Path) -> bool:
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def released_soon(lock: Path, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not held(lock):
            return True
        time.sleep(0.02)
    return False


def bash(s: Setup, command: str, timeout: float | None = None) -> tuple[str, Receipt]:
    args: dict[str, object] = {"command": command}
    if timeout is not None:
        args["timeout"] = timeout
    outcome, receipt = s.house.handle(call("Bash", args), ANA, surface="cli")
    return outcome.result.text, receipt


def test_spool_memory_is_bounded_and_invents_nothing() -> None:
    cap = 1 << 20
    spool = Spool(cap)
    chunk = b"y\n" * 32768
    peak = 0
    for _ in range(16_384):  # 1 GiB through a 1 MiB cap
        spool.write(chunk)
        peak = max(peak, spool.held)
    assert peak <= cap // 2 + 2 * (cap - cap // 2)
    kept = spool.finish()
    assert kept.size == 16_384 * len(chunk) and kept.dropped == kept.size - kept.kept
    assert kept.kept == cap and set(kept.head.split(b"\n")) <= {b"y", b""}
    assert set(kept.tail.split(b"\n")) <= {b"y", b""}


def test_spool_cuts_on_character_boundaries() -> None:
    spool = Spool(9)
    spool.write("ééééééééé".encode())  # 18 bytes, 2 per character
    kept = spool.finish()
    assert kept.head.decode() == "éé" and kept.tail.decode() == "éé"
    assert kept.dropped == 18 - 8 and kept.size == 18


def rss_peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize("mode", ["sandboxed", "unsandboxed"])
def test_yes(tmp_path: Path, mode: str, request: pytest.FixtureRequest) -> None:
    if mode == "sandboxed":
        request.getfixturevalue("sandboxed")
    config: dict[str, object] = {"mode": "trusted"}
    if mode == "unsandboxed":
        config["sandbox"] = "off"
    s = make_setup(tmp_path, policy=Policy.from_config(config))
    before = rss_peak()
    text, r = bash(s, "yes", timeout=3)
    grown = rss_peak() - before
    seen = r.observations
    assert r.status == "timeout"
    out = seen["stdout"]
    assert out["size"] > 4 * out["kept"]  # it wrote far more than was kept
    assert out["kept"] <= seen["output_cap"] and out["dropped"] == out["size"] - out["kept"]
    stored = r.output.stored if r.output is not None else None
    whole = read_output(s.ledger, s.scope, stored["record"]) if stored else text
    assert f"{out['dropped']:,} bytes of stdout dropped here" in whole
    assert grown < 96 * 1024 * 1024  # a few times the 4 MiB cap, not gigabytes
    s.close()


def test_closed_stdout_shell_timeout(s: Setup) -> None:
    lock = s.root / "closer.lock"
    _text, r = bash(s, f"exec >&- 2>&- 9>>{lock}; flock -x 9; sleep 30", timeout=1)
    assert r.status == "timeout" and r.observations["timed_out"] is True
    assert released_soon(lock)


SURVIVORS = ["background", "nohup", "double-fork", "setsid", "disown"]


@pytest.mark.parametrize("how", [*SURVIVORS, "setsid-clean-env"])
def test_background_survivor_sandboxed(tmp_path: Path, how: str, sandboxed: SandboxStatus) -> None:
    s = make_setup(tmp_path, policy=Policy.from_config({"mode": "trusted"}))
    lock = s.root / "survivor.lock"
    text, r = bash(s, holder(lock, how))
    assert r.status == "ok" and text.startswith("launched")
    assert r.observations["sandbox"]["active"] is True
    assert (s.root / "survivor.lock.ready").read_text() == "held\n"
    assert released_soon(lock), how
    s.close()


@pytest.mark.parametrize("how", SURVIVORS)
def test_background_survivor_unsandboxed(tmp_path: Path, how: str) -> None:
    # Without the sandbox: the group kill, then the sweep of the call's marker variable. A
    # process that also clears its environment escapes there (documented residual risk).
    s = make_setup(tmp_path, policy=Policy.from_config({"mode": "trusted", "sandbox": "off"}))
    lock = s.root / "survivor.lock"
    _text, r = bash(s, holder(lock, how))
    assert r.status == "ok" and r.observations["sandbox"]["active"] is False
    assert (s.root / "survivor.lock.ready").read_text() == "held\n"
    assert released_soon(lock), how
    s.close()


@pytest.mark.parametrize("how", [*SURVIVORS, "setsid-clean-env"])
def test_timeout_kills_every_survivor(tmp_path: Path, how: str, sandboxed: SandboxStatus) -> None:
    s = make_setup(tmp_path, policy=Policy.from_config({"mode": "trusted"}))
    lock = s.root / "survivor.lock"
    _text, r = bash(s, holder(lock, how) + "; sleep 60", timeout=2)
    assert r.status == "timeout"
    assert released_soon(lock), how
    s.close()
