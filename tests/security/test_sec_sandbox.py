"""Issue 9 §2: the OS sandbox is the enforcement; rules are advice.

The matrix: under each policy, a trusted-mode Bash call (no rule stands in the way) tries to
write outside the workspace, write comal's configuration, read the ledger, open a socket and
leave a daemon behind. Each is refused under the default policy and allowed only where the
policy says so.
"""

# covers: OPS-2, OPS-5, OPS-7, CFG-2, RES-6

from __future__ import annotations

import os
import shutil
import socket
import stat
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from _home_support import path_without
from _ops_support import ANA, Setup, call, make_setup
from comal.agent._session import run_checks
from comal.ops import (
    Actor,
    CallbackApprover,
    Policy,
    SandboxPolicy,
    SandboxStatus,
    sandbox_status,
)


@pytest.fixture
def elsewhere() -> Iterator[Path]:
    """A host directory outside the workspace and outside /tmp (which the sandbox hides)."""
    base = Path("/var/tmp") / f"comal-sec-{uuid.uuid4().hex}"
    base.mkdir(parents=True)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    server.close()


POLICIES: dict[str, dict[str, object]] = {
    "default": {},
    "network": {"network": True},
    "writable-elsewhere": {"writable_paths": ["{elsewhere}"]},
    "off": {"enabled": False},
}
# probe -> the policies under which it may succeed
ALLOWED: dict[str, set[str]] = {
    "write-outside": {"writable-elsewhere", "off"},
    "write-config": {"off"},
    "replace-config": {"off"},
    "read-ledger": {"off"},
    "read-config-dir": {"off"},
    "open-socket": {"network", "off"},
    "leave-daemon": set(),
}


def house_for(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> Setup:
    ws = tmp_path / "ws"
    (ws / ".comal").mkdir(parents=True)
    config = ws / ".comal" / "config.json"
    config.write_text('{"mode": "ask"}')
    monkeypatch.setenv("COMAL_CONFIG", str(config))
    config_home = elsewhere / "config"
    (config_home / "comal").mkdir(parents=True)
    (config_home / "comal" / "keys.json").write_text('{"key": "sk-secret"}')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    box = {
        k: ([str(elsewhere)] if v == ["{elsewhere}"] else v) for k, v in POLICIES[policy].items()
    }
    return make_setup(
        tmp_path,
        policy=Policy.from_config({"mode": "trusted", "sandbox": box}),
        ledger_path=ws / ".comal" / "ledger.db",
    )


def probe_command(name: str, elsewhere: Path, port: int) -> str:
    return {
        "write-outside": f"echo pwned > {elsewhere}/pwned.txt && cat {elsewhere}/pwned.txt",
        "write-config": 'echo \'{"mode": "trusted"}\' > .comal/config.json && echo wrote',
        "replace-config": "echo '{}' > x.json && mv -f x.json .comal/config.json && echo moved",
        "read-ledger": "head -c 16 .comal/ledger.db",
        "read-config-dir": f"cat {elsewhere}/config/comal/keys.json",
        "open-socket": f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected",
        "leave-daemon": (
            "setsid bash -c 'exec 9>>daemon.lock; flock -x 9; touch daemon.ready; sleep 600' "
            ">/dev/null 2>&1 < /dev/null & for _ in $(seq 500); do [ -e daemon.ready ] && "
            "break; sleep 0.01; done; echo started"
        ),
    }[name]


def succeeded(name: str, s: Setup, elsewhere: Path, text: str) -> bool:
    import fcntl
    import time

    if name == "write-outside":
        return (elsewhere / "pwned.txt").exists()
    if name in ("write-config", "replace-config"):
        return (s.root / ".comal" / "config.json").read_text() != '{"mode": "ask"}'
    if name == "read-ledger":
        return "SQLite format 3" in text
    if name == "read-config-dir":
        return "sk-secret" in text
    if name == "open-socket":
        return "connected" in text
    lock = s.root / "daemon.lock"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the daemon is dead once its lock is free
        with open(lock, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(0.05)
                continue
            return False
    return True


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("probe", sorted(ALLOWED))
def test_sandbox_matrix(
    tmp_path: Path,
    elsewhere: Path,
    listener: int,
    monkeypatch: pytest.MonkeyPatch,
    sandboxed: SandboxStatus,
    policy: str,
    probe: str,
) -> None:
    s = house_for(tmp_path, elsewhere, monkeypatch, policy)
    if probe == "read-ledger":
        assert (s.root / ".comal" / "ledger.db").read_bytes().startswith(b"SQLite format 3")
    outcome, receipt = s.house.handle(
        call("Bash", {"command": probe_command(probe, elsewhere, listener), "timeout": 30}),
        ANA,
        surface="cli",
    )
    assert receipt.judgment["rule"] == "mode:trusted"  # no rule stood in the way
    assert receipt.observations["sandbox"]["active"] is (policy != "off")
    got = succeeded(probe, s, elsewhere, outcome.result.text)
    assert got is (policy in ALLOWED[probe]), (probe, policy, outcome.result.text)
    s.close()


def test_read_only_mode_runs_no_shell(tmp_path: Path) -> None:
    s = make_setup(tmp_path, policy=Policy.from_config({"mode": "read-only"}))
    _, receipt = s.house.handle(call("Bash", {"command": "touch x"}), ANA, surface="cli")
    assert (receipt.status, receipt.judgment["rule"]) == ("denied", "mode:read-only")
    assert not (s.root / "x").exists()
    s.close()


def test_secrets_leave_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandboxed: SandboxStatus
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("KEEP_TOKEN", "kept")
    s = make_setup(
        tmp_path,
        policy=Policy.from_config({"mode": "trusted", "sandbox": {"env_keep": ["KEEP_TOKEN"]}}),
    )
    outcome, _ = s.house.handle(call("Bash", {"command": "env"}), ANA, surface="cli")
    assert "sk-ant-secret" not in outcome.result.text and "ghp-secret" not in outcome.result.text
    assert "KEEP_TOKEN=kept" in outcome.result.text
    s.close()


def test_sandbox_status(sandboxed: SandboxStatus, tmp_path: Path) -> None:
    assert sandboxed.available and sandboxed.active and sandboxed.version
    assert sandboxed.as_dict()["backend"] == "bubblewrap"
    off = sandbox_status(SandboxPolicy(enabled=False))
    assert off.available and not off.active and "turned off" in off.reason
    s = make_setup(tmp_path)
    assert s.house.sandbox_status().active is True
    s.close()


def test_no_sandbox_here(tmp_path: Path) -> None:
    missing = sandbox_status(bwrap=str(tmp_path / "no-bwrap"))
    assert not missing.available and not missing.active
    s = make_setup(tmp_path, bwrap=str(tmp_path / "no-bwrap"))
    assert s.house.sandbox_status().available is False
    outcome, receipt = s.house.handle(call("Bash", {"command": "touch x"}), ANA, surface="cli")
    assert (receipt.status, receipt.judgment["rule"]) == ("denied", "sandbox:unavailable")
    assert "SANDBOX_UNAVAILABLE" in outcome.result.text and not (s.root / "x").exists()
    s.close()


@pytest.mark.parametrize("opt_out", ["sandbox-off", "allow-unsandboxed", "human-approved"])
def test_no_sandbox_runs_only_with_an_explicit_opt_out(tmp_path: Path, opt_out: str) -> None:
    config: dict[str, object] = {"mode": "trusted"}
    if opt_out == "sandbox-off":
        config["sandbox"] = "off"
    elif opt_out == "allow-unsandboxed":
        config["sandbox"] = {"allow_unsandboxed": True}
    else:
        config["mode"] = "ask"
    asked: list[str] = []
    approver = CallbackApprover(lambda r: asked.append(r.reason) is None, by=Actor.user("ana"))
    s = make_setup(
        tmp_path,
        policy=Policy.from_config(config),
        approver=approver,
        bwrap=str(tmp_path / "no-bwrap"),
    )
    _, receipt = s.house.handle(call("Bash", {"command": "touch x"}), ANA, surface="cli")
    assert receipt.status == "ok" and (s.root / "x").exists()
    assert receipt.observations["sandbox"]["active"] is False
    if opt_out == "human-approved":
        assert asked and "approving runs it unsandboxed" in asked[0]
    s.close()


def test_a_sandbox_that_fails_to_start_is_a_coded_error(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        "for last; do :; done\n"
        '[ "$1" = --version ] && { echo "bubblewrap 0.0-fake"; exit 0; }\n'
        '[ "$last" = true ] && exit 0\n'
        'echo "bwrap: Creating new namespace failed: nope" >&2; exit 1\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    s = make_setup(tmp_path, bwrap=str(fake))
    assert s.house.sandbox_status().active
    outcome, receipt = s.house.handle(call("Bash", {"command": "touch x"}), ANA, surface="cli")
    assert receipt.status == "error" and receipt.observations["error"] == "SANDBOX_UNAVAILABLE"
    assert "Creating new namespace failed" in outcome.result.text
    assert not (s.root / "x").exists()
    s.close()


def test_protected_paths_the_house_is_given(
    tmp_path: Path, sandboxed: SandboxStatus, elsewhere: Path
) -> None:
    key = elsewhere / "id_key"
    key.write_text("PRIVATE KEY")
    (tmp_path / "ws").mkdir()
    inside = tmp_path / "ws" / "deploy.key"
    inside.write_text("PRIVATE KEY 2")
    s = make_setup(
        tmp_path,
        policy=Policy.from_config({"mode": "trusted"}),
        protected_paths=[key, inside],
    )
    outcome, _ = s.house.handle(
        call("Bash", {"command": f"cat {key} deploy.key; echo x > deploy.key; rm deploy.key"}),
        ANA,
        surface="cli",
    )
    assert "PRIVATE KEY" not in outcome.result.text
    assert inside.read_text() == "PRIVATE KEY 2" and os.path.exists(inside)
    s.close()


@pytest.mark.parametrize("allow", [False, True])
def test_checks_follow_the_operators_sandbox_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allow: bool
) -> None:
    # covers: RES-5, CFG-2
    monkeypatch.setenv("PATH", path_without("bwrap", tmp_path / "bin"))  # a fresh machine
    box = {"allow_unsandboxed": True} if allow else {}
    s = make_setup(tmp_path, policy=Policy.from_config({"mode": "trusted", "sandbox": box}))
    (check,) = run_checks(s.house, ("touch checked",), "r1")
    assert check.status == ("ok" if allow else "denied"), check.output
    assert (s.root / "checked").exists() is allow
    s.close()
