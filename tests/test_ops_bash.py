"""The native shell: timeouts, whole output, exact bytes, process groups (OPS-5, PIP-3, EVI-1)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _ops_support import Setup, call, make_setup, on_cli, propose
from comal.ops import DEFAULT_CAP, Policy, read_output


@pytest.fixture
def s(tmp_path: Path) -> Iterator[Setup]:
    setup = make_setup(tmp_path, policy=Policy.from_config({"mode": "trusted"}))
    yield setup
    setup.close()


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for init to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def gone_soon(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
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


def test_timeout_kills_the_whole_group(s: Setup, tmp_path: Path) -> None:
    # covers: OPS-5, RES-4
    pid_file = tmp_path / "grandchild.pid"
    command = f"(sleep 30 & echo $! > {pid_file}; wait) ; echo never"
    start = time.monotonic()
    o, r = propose(s, call("Bash", {"command": command, "timeout": 0.5}))
    assert time.monotonic() - start < 5
    assert r.status == "timeout" and r.disposition == "basket"
    assert r.observations["timed_out"] is True and r.observations["exit_code"] is None
    assert "timed out after 0.5s" in o.result.text and "never" not in o.result.text
    assert gone_soon(int(pid_file.read_text()))


def test_a_child_outliving_its_parent_is_killed_with_the_group(s: Setup) -> None:
    # covers: OPS-5
    start = time.monotonic()
    o, r = on_cli(s, call("Bash", {"command": "sleep 30 & echo $!"}))
    assert time.monotonic() - start < 5  # the orphan does not hold the pipes open
    assert r.status == "ok" and r.observations["process_group_killed"] is True
    assert gone_soon(int(o.result.text.split("\n")[0]))


def test_non_utf8_output_keeps_the_exact_bytes_digest(s: Setup) -> None:
    # covers: EVI-4, LED-6
    raw = b"\xff\xfe caf\xe9 ok\n"
    o, r = propose(s, call("Bash", {"command": r"printf '\xff\xfe caf\xe9 ok\n'"}))
    assert "\ufffd\ufffd caf\ufffd ok" in o.result.text
    assert r.observations["stdout"] == {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "size": len(raw),
        "lossy": True,
    }
    assert f"sha256 {hashlib.sha256(raw).hexdigest()}" in o.result.text


def test_ten_megabytes_are_stored_whole_with_an_inline_reference(s: Setup) -> None:
    # covers: PIP-3, EVI-1, LED-6
    size = 10 * 1024 * 1024
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
    assert os.path.getsize(s.ledger.path) > size  # it is in the ledger, not in a side file
