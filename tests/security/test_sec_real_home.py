"""Issue 19: comal as a real user runs it — ``comal -p`` as a process, the ledger and the
configuration in their default places under a home outside /tmp.

Every other test points the ledger at a temporary file under /tmp, which the sandbox hides
anyway; with the ledger in ``~/.local/share/comal`` (inside the masked data directory) bwrap
could not set up, so no Bash call ran and no MCP server started for anyone. And when the
sandbox is what stopped a call, ``-p`` says so plainly, apart from the command's own failure.
"""

# covers: OPS-1, OPS-3

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _home_support import User, path_without, real_user
from comal.ops import SandboxStatus

SERVER = Path(__file__).resolve().parent.parent / "_ops_mcp_server.py"


@pytest.fixture
def user() -> Iterator[User]:
    yield from real_user()


def _bash(command: str, call_id: str = "b1") -> dict[str, Any]:
    call = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}
    return {"content": [call]}


def _text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def _run(user: User, *replies: dict[str, Any], **env: str) -> tuple[dict[str, Any], str]:
    script = user.script(*replies)
    done = user.comal(
        "-p", "go", "--model", f"script:{script}", "--mode", "trusted", "--json", **env
    )
    assert done.stdout, done.stderr
    data: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    data["exit"] = done.returncode
    return data, done.stderr


def _result(user: User, session: str, call_id: str) -> str:
    with user.ledger() as led:
        entry = led.entry_by_call(led.resolve(session), call_id)
        assert entry is not None and entry.message.tool_result is not None
        return entry.message.tool_result.text


def test_bash_runs_with_the_default_ledger_and_a_home_outside_tmp(
    user: User, sandboxed: SandboxStatus
) -> None:
    data, err = _run(user, _bash("echo hi; ls -A ~/.local/share/comal"), _text("done"))
    assert (data["exit"], data["status"]) == (0, "finished"), err
    (receipt,) = data["receipts"]
    assert receipt["status"] == "ok", err
    assert receipt["observations"]["sandbox"]["active"] is True
    assert user.ledger_path.exists()  # the default place, nothing given
    assert _result(user, data["session"], "b1") == "hi\n[exit code 0]"  # the data dir: empty


def test_an_mcp_server_starts_with_the_default_ledger_and_a_home_outside_tmp(
    user: User, sandboxed: SandboxStatus
) -> None:
    server = {
        "command": sys.executable,
        "args": [str(SERVER)],
        # The sandbox's /tmp is private: a checkout under /tmp must stay readable to it.
        "readable_paths": [sys.prefix, sys.base_prefix, str(SERVER.parent)],
        "effects": {"echo": ["none"]},
    }
    user.configure({"mcp_servers": {"t": server}})
    call = {"type": "tool_use", "id": "m1", "name": "mcp__t__echo",
            "input": {"text": "hi", "times": 2}}  # fmt: skip
    data, err = _run(user, {"content": [call]}, _text("done"))
    assert (data["exit"], data["status"]) == (0, "finished"), err
    (receipt,) = data["receipts"]
    assert (receipt["operation"], receipt["status"]) == ("mcp__t__echo", "ok"), err
    assert "hihi" in _result(user, data["session"], "m1")


def test_p_says_plainly_that_bash_was_denied_for_want_of_the_sandbox(
    user: User, tmp_path: Path
) -> None:
    path = path_without("bwrap", tmp_path / "bin")
    data, err = _run(user, _bash("echo hi"), _text("done"), PATH=path)
    (receipt,) = data["receipts"]
    assert receipt["judgment"]["rule"] == "sandbox:unavailable"
    lines = [line for line in err.splitlines() if line.startswith("! Bash denied")]
    assert len(lines) == 1, err
    assert "bubblewrap (bwrap) is not installed" in err and "nothing ran" in err


def test_p_says_plainly_that_the_sandbox_failed_to_set_up_not_the_command(
    user: User, tmp_path: Path
) -> None:
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        "for last; do :; done\n"
        '[ "$1" = --version ] && { echo "bubblewrap 0.0-fake"; exit 0; }\n'
        '[ "$last" = true ] && exit 0\n'
        'echo "bwrap: Can\'t create file at /x/ledger.db: Read-only file system" >&2; exit 1\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    path = f"{fake.parent}:{path_without('bwrap', tmp_path / 'rest')}"
    data, err = _run(user, _bash("echo hi"), _bash("exit 3", "b2"), _text("done"), PATH=path)
    assert [r["observations"].get("error") for r in data["receipts"]] == [
        "SANDBOX_UNAVAILABLE",
        "SANDBOX_UNAVAILABLE",
    ]
    flat = " ".join(err.split())  # the console wraps long lines
    assert "! Bash did not run (2 calls): the sandbox (bubblewrap) failed to set up" in flat
    assert "(bwrap: Can't create file at /x/ledger.db: Read-only file system)" in flat
    assert "not its own failure" in flat
