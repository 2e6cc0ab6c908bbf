"""The native shell: timeouts, a person's stop, bounded output, exact bytes, the output as it
comes, nothing outliving the call (OPS-5, PIP-3, EVI-1, EVI-4, DRV-2).

Whether a process the command started still lives is read from a lock it holds on a file in
the workspace: a lock is released only when its last holder dies, and it is visible across the
sandbox's PID namespace, where the command's process ids mean nothing to the test.
"""

from __future__ import annotations

import fcntl
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _ops_support import ANA, Setup, call, make_setup, on_cli, propose
from comal.messages import Message
from comal.ops import DEFAULT_CAP, LIVE_CAP, Policy, StopSignal, may_retry, read_output


@pytest.fixture
def s(tmp_path: Path) -> Iterator[Setup]:
    setup = make_setup(tmp_path, policy=Policy.from_config({"mode": "trusted"}))
    yield setup
    setup.close()


def holder(lock: Path, how: str = "") -> str:
    """A shell snippet that starts a process holding ``lock`` for ten minutes (``how`` wraps
    it: ``nohup``, ``setsid`` ...) and waits until it holds it."""
    inner = f"exec 9>>{lock}; flock -x 9; echo held >> {lock}.ready; exec sleep 600"
    return (
        f"{how} bash -c '{inner}' >/dev/null 2>&1 & "
        f"for _ in $(seq 200); do [ -s {lock}.ready ] && break; sleep 0.01; done"
    )


def held(lock: Path) -> bool:
    """True while some process holds ``lock``."""
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


def test_exit_codes_and_stderr(s: Setup) -> None:
    # covers: OPS-5
    o, r = propose(s, call("Bash", {"command": "echo out; echo err >&2; exit 3"}))
    assert o.result.text == "out\n[stderr]\nerr\n[exit code 3]"
    assert r.status == "error" and r.observations["exit_code"] == 3
    assert r.observations["effects"] == "unknown"
    assert r.observations["stdout"]["sha256"] == hashlib.sha256(b"out\n").hexdigest()
    assert r.preparation is not None  # effects unknown: the start is recorded first
    o, r = propose(s, call("Bash", {"command": "printf ok"}))
    assert (o.result.text, r.status, r.disposition) == ("ok\n[exit code 0]", "ok", "serve")


def test_timeout_kills_the_whole_group(s: Setup) -> None:
    # covers: OPS-5, RES-4
    lock = s.root / "grandchild.lock"
    command = f"{holder(lock)}; wait; echo never"
    o, r = propose(s, call("Bash", {"command": command, "timeout": 1}))
    assert r.status == "timeout" and r.disposition == "basket"
    assert r.observations["timed_out"] is True and r.observations["exit_code"] is None
    assert "timed out after 1s" in o.result.text and "never" not in o.result.text
    assert (lock.parent / "grandchild.lock.ready").read_text() == "held\n"
    assert released_soon(lock)


def test_a_child_outliving_its_parent_is_killed_with_the_group(s: Setup) -> None:
    # covers: OPS-5
    lock = s.root / "orphan.lock"
    o, r = on_cli(s, call("Bash", {"command": f"{holder(lock)}; echo started"}))
    assert r.status == "ok" and o.result.text == "started\n[exit code 0]"
    assert (s.root / "orphan.lock.ready").exists()
    assert released_soon(lock)


def test_non_utf8_output_keeps_the_exact_bytes_digest(s: Setup) -> None:
    # covers: EVI-4, LED-6
    raw = b"\xff\xfe caf\xe9 ok\n"
    o, r = propose(s, call("Bash", {"command": r"printf '\xff\xfe caf\xe9 ok\n'"}))
    assert "\ufffd\ufffd caf\ufffd ok" in o.result.text
    assert r.observations["stdout"] == {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "size": len(raw),
        "lossy": True,
        "kept": len(raw),
        "dropped": 0,
    }
    assert f"sha256 {hashlib.sha256(raw).hexdigest()}" in o.result.text


def test_ten_megabytes_are_stored_whole_with_an_inline_reference(tmp_path: Path) -> None:
    # covers: PIP-3, EVI-1, LED-6
    size = 10 * 1024 * 1024
    policy = Policy.from_config({"mode": "trusted", "limits": {"output_cap": 16 * 1024 * 1024}})
    s = make_setup(tmp_path, policy=policy)
    o, r = propose(s, call("Bash", {"command": f"head -c {size} /dev/zero | tr '\\0' 'a'"}))
    assert r.status == "ok"
    assert r.observations["stdout"]["size"] == size
    assert r.observations["stdout"]["sha256"] == hashlib.sha256(b"a" * size).hexdigest()
    inline = o.result.text
    assert len(inline) <= DEFAULT_CAP and inline.endswith("[exit code 0]")
    stored = r.output.stored
    assert stored is not None and stored["size"] == size + len("\n[exit code 0]")
    assert f"sha256 {stored['sha256']}" in inline and f"record={stored['record']}" in inline
    whole = read_output(s.ledger, s.scope, stored["record"], expected_digest=stored["sha256"])
    assert whole == "a" * size + "\n[exit code 0]"
    assert hashlib.sha256(whole.encode()).hexdigest() == stored["sha256"] == r.output.sha256
    # Read back from the ledger, and in no side file: nothing on disk holds the 10 MB as they
    # are (the ledger keeps large bodies zstd-compressed at rest, digests over the text).
    assert not any(p.stat().st_size >= size for p in tmp_path.rglob("*") if p.is_file())
    s.close()


def test_output_past_the_cap_keeps_head_and_tail_and_counts_the_rest(tmp_path: Path) -> None:
    # covers: EVI-4, PIP-3, LED-6
    cap = 64 * 1024
    s = make_setup(
        tmp_path, policy=Policy.from_config({"mode": "trusted", "limits": {"output_cap": cap}})
    )
    lines = 100_000
    _o, r = propose(s, call("Bash", {"command": f"seq 1 {lines}"}))
    whole = "".join(f"{i}\n" for i in range(1, lines + 1)).encode()
    seen = r.observations["stdout"]
    assert seen["size"] == len(whole) and seen["sha256"] == hashlib.sha256(whole).hexdigest()
    assert seen["kept"] == cap and seen["dropped"] == len(whole) - cap
    assert r.observations["truncated"] is True
    stored = r.output.stored
    assert stored is not None
    text = read_output(s.ledger, s.scope, stored["record"])
    head, note_tail = text.split("\n[", 1)
    note, tail = note_tail.split("]\n", 1)
    assert whole.startswith(head.encode()) and len(head) == cap // 2
    tail = tail.removesuffix("[exit code 0]")
    assert whole.endswith(tail.encode()) and len(tail) == cap // 2
    assert f"{len(whole) - cap:,} bytes of stdout dropped here" in note
    # EVI-4: every kept byte is the process's own, in its order; nothing was made up.
    assert hashlib.sha256((head + tail).encode()).hexdigest() == seen["kept_sha256"]
    s.close()


def test_a_stop_kills_the_running_command_and_keeps_its_output_so_far(s: Setup) -> None:
    # covers: DRV-2, OPS-5, RES-4
    # The person stops the run as soon as the command's first line reached them (streamed
    # while it runs): the group dies as at a timeout, the result keeps that line and says who
    # stopped it, the receipt is "interrupted" and set aside (its effects are unknown).
    lock = s.root / "stopped.lock"
    command = f"{holder(lock)}; echo started; sleep 30; echo never"
    stop = StopSignal()
    streamed: list[tuple[str, str]] = []

    def output(stream: str, text: str) -> None:
        streamed.append((stream, text))
        if "started" in text:
            stop.request("the user ana")

    tool_call = call("Bash", {"command": command})
    step = s.ledger.append(s.scope, [Message.assistant("", tool_call)])[0].step
    outcome = s.house.run(tool_call, ANA, join_step=step, stop=stop, on_output=output)
    r = s.house.record(outcome, join_step=step)
    assert (r.status, r.disposition) == ("interrupted", "basket")
    seen = r.observations
    assert seen["interrupted"] is True and seen["exit_code"] is None
    assert seen["seconds"] < 30  # it did not run to its end
    text = outcome.result.text
    assert text.startswith("started\n") and "never" not in text
    assert "[interrupted by the user ana after " in text and "process group was killed" in text
    assert outcome.result.is_error
    assert ("stdout", "started\n") in streamed
    assert released_soon(lock)  # the command's background process died with it
    assert not may_retry(s.ledger, s.scope, tool_call.id)


def test_live_output_is_batched_and_capped(tmp_path: Path) -> None:
    # covers: DRV-2
    # A command that writes a lot reaches the host in few pieces, capped; the result keeps
    # its output as the house keeps it.
    setup = make_setup(tmp_path, policy=Policy.from_config({"mode": "trusted"}))
    try:
        pieces: list[str] = []
        command = "head -c 3000000 /dev/zero | tr '\\0' x"
        tool_call = call("Bash", {"command": command})
        outcome = setup.house.run(
            tool_call, ANA, surface="cli", on_output=lambda _s, text: pieces.append(text)
        )
        assert outcome.receipt.status == "ok"
        shown = "".join(pieces)
        assert len(shown) < LIVE_CAP + 200 and "live output stops after" in shown
        assert len(pieces) < 100  # batched, not one per read
        assert outcome.receipt.observations["stdout"]["size"] == 3_000_000
    finally:
        setup.close()
