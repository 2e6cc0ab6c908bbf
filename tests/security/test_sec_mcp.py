"""Issue 9 §2: an MCP server is a process the house starts, so it runs in the OS sandbox too.

A real stdio server (``_hostile_mcp_server.py``, the MCP SDK's server side, run with this
Python) is started through :class:`~comal.ops.McpServer` with the house's sandbox, and its
tools try what a hostile server would: write outside the workspace, rewrite comal's
configuration, read the ledger and the key file, open a connection, read a secret from the
environment, map more memory than the cap and leave a daemon behind. Under the sandbox each
fails while the legitimate job still works; with the operator's opt-out (``sandbox: off``)
the same probes succeed, which shows they can fail.
"""

# covers: OPS-2, OPS-5, OPS-7, CFG-2

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _ops_support import ANA, Setup, call, make_setup
from comal.errors import InputError
from comal.ops import McpServer, Policy, SandboxStatus, SandboxUnavailable

SERVER = Path(__file__).with_name("_hostile_mcp_server.py")
# The server's Python and script, shown read-only even when the clone lives under /tmp.
READABLE = [sys.prefix, str(SERVER.parent)]


@pytest.fixture
def elsewhere() -> Iterator[Path]:
    """A host directory outside the workspace and outside /tmp (which the sandbox hides)."""
    base = Path("/var/tmp") / f"comal-sec-mcp-{uuid.uuid4().hex}"
    base.mkdir(parents=True)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def daemon(elsewhere: Path) -> Iterator[Path]:
    """A host daemon's Unix socket outside /tmp and /run (which the sandbox hides anyway)."""
    path = elsewhere / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    yield path
    server.close()


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


def house(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch, sandbox: Any, **kw: Any
) -> Setup:
    ws = tmp_path / "ws"
    (ws / ".comal").mkdir(parents=True)
    (ws / ".comal" / "config.json").write_text('{"mode": "ask"}')
    monkeypatch.setenv("COMAL_CONFIG", str(ws / ".comal" / "config.json"))
    config_home = elsewhere / "config"
    (config_home / "comal").mkdir(parents=True)
    (config_home / "comal" / "keys.json").write_text('{"key": "sk-secret"}')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    return make_setup(
        tmp_path,
        policy=Policy.from_config({"mode": "trusted", "sandbox": sandbox}),
        ledger_path=ws / ".comal" / "ledger.db",
        **kw,
    )


def start(
    s: Setup, *, network: bool = False, errlog: Any = None, register: bool = True
) -> McpServer:
    box = s.house.sandbox()
    assert box is not None
    server = McpServer(
        "h",
        sys.executable,
        [str(SERVER)],
        env={"SERVER_SETTING": "given"},
        sandbox=box,
        network=network,
        readable_paths=READABLE,
        errlog=errlog if errlog is not None else sys.stderr,
    )
    server.__enter__()
    if register:
        s.house.registry.add_all(server.operations())
    return server


def tool(s: Setup, which: str, **args: Any) -> tuple[str, dict[str, Any]]:
    outcome, receipt = s.house.handle(call(f"mcp__h__{which}", args), ANA, surface="cli")
    assert receipt.status == "ok", outcome.result.text
    return outcome.result.text, receipt.observations


def lock_free(lock: Path, seconds: float = 5.0) -> bool:
    """True once no process holds ``lock`` (a lock dies with its last holder, seen across
    the sandbox's PID namespace)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with open(lock, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(0.05)
                continue
            return True
    return False


# policy -> the probes that may succeed under it
POLICIES: dict[str, tuple[Any, bool, set[str]]] = {
    "default": ({}, False, set()),
    "network": ({}, True, {"open-socket"}),
    "off": (
        "off",
        False,
        {
            "write-outside",
            "write-config",
            "read-ledger",
            "read-keys",
            "open-socket",
            "unix-socket",
            "memory",
        },
    ),
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_mcp_server_matrix(
    tmp_path: Path,
    elsewhere: Path,
    listener: int,
    daemon: Path,
    monkeypatch: pytest.MonkeyPatch,
    sandboxed: SandboxStatus,
    policy: str,
) -> None:
    sandbox, network, allowed = POLICIES[policy]
    s = house(tmp_path, elsewhere, monkeypatch, sandbox)
    errlog = open(tmp_path / "err.log", "w")  # the server's stderr, closed below
    server = start(s, network=network, errlog=errlog)
    got: dict[str, bool] = {}
    pid: str | None = None
    try:
        # The legitimate job works: answer, and write inside the workspace.
        text, seen = tool(s, "echo", text="hello")
        assert text == "hello"
        assert seen["sandbox"]["active"] is (policy != "off")
        if policy != "off":
            assert seen["sandbox"]["network"] is network
            assert seen["sandbox"]["memory_cap"] == 2 << 30
            assert seen["sandbox"]["seccomp"] is True
        assert tool(s, "write", path=str(s.root / "out.txt"), text="ok")[0] == "wrote"
        assert (s.root / "out.txt").read_text() == "ok"
        assert tool(s, "reserve", mib=64)[0] == "reserved"
        assert tool(s, "env", name="SERVER_SETTING")[0] == "given"
        # Secrets never reach a server that was not given them (the SDK's rule, kept).
        assert tool(s, "env", name="ANTHROPIC_API_KEY")[0] == "<unset>"

        tool(s, "write", path=str(elsewhere / "pwned.txt"), text="pwned")
        got["write-outside"] = (elsewhere / "pwned.txt").exists()
        config = s.root / ".comal" / "config.json"
        tool(s, "write", path=str(config), text='{"mode": "trusted"}')
        got["write-config"] = config.read_text() != '{"mode": "ask"}'
        ledger = s.root / ".comal" / "ledger.db"
        assert ledger.read_bytes().startswith(b"SQLite format 3")
        got["read-ledger"] = "SQLite format 3" in tool(s, "read", path=str(ledger))[0]
        keys = elsewhere / "config" / "comal" / "keys.json"
        got["read-keys"] = "sk-secret" in tool(s, "read", path=str(keys))[0]
        got["open-socket"] = tool(s, "connect", port=listener)[0] == "connected"
        got["unix-socket"] = tool(s, "unix", path=str(daemon))[0] == "connected"
        got["memory"] = tool(s, "reserve", mib=3 << 10)[0] == "reserved"  # 3 GiB > the cap

        lock = s.root / "daemon.lock"
        assert tool(s, "spawn", lock=str(lock))[0] == "started"
        pid = (s.root / "daemon.lock.pid").read_text()
        assert not lock_free(lock, 0.2)  # the daemon holds it while the server runs
    finally:
        server.close()
        errlog.close()
    try:
        # Nothing the server started outlives it under the sandbox; unsandboxed, a
        # double-forked setsid daemon escapes the SDK's process-group kill.
        got["leave-daemon"] = not lock_free(lock)
    finally:
        if policy == "off" and pid:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
    expected = {p: p in allowed or (policy == "off" and p == "leave-daemon") for p in got}
    assert got == expected
    s.close()


def test_no_sandbox_here_the_server_is_not_started(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = house(tmp_path, elsewhere, monkeypatch, {}, bwrap=str(tmp_path / "no-bwrap"))
    marker = tmp_path / "ws" / "started"
    box = s.house.sandbox()
    assert box is not None
    server = McpServer("h", "sh", ["-c", f"touch {marker}"], sandbox=box, readable_paths=READABLE)
    with pytest.raises(SandboxUnavailable) as err:
        server.__enter__()
    assert err.value.code == "SANDBOX_UNAVAILABLE" and "allow_unsandboxed" in str(err.value)
    assert not marker.exists()
    s.close()


@pytest.mark.parametrize("opt_out", [{"allow_unsandboxed": True}, "off"])
def test_no_sandbox_runs_only_with_the_operators_opt_out(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch, opt_out: Any
) -> None:
    s = house(tmp_path, elsewhere, monkeypatch, opt_out, bwrap=str(tmp_path / "no-bwrap"))
    log = tmp_path / "err.log"
    with open(log, "w") as errlog:
        server = start(s, errlog=errlog)
        try:
            text, seen = tool(s, "echo", text="hi")
            assert text == "hi" and seen["sandbox"]["active"] is False
        finally:
            server.close()
    assert "runs WITHOUT the OS sandbox" in log.read_text()
    s.close()


def test_the_operator_is_told_a_server_has_the_network(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch, sandboxed: SandboxStatus
) -> None:
    s = house(tmp_path, elsewhere, monkeypatch, {})
    log = tmp_path / "err.log"
    with open(log, "w") as errlog:
        quiet = start(s, errlog=errlog, register=False)
        quiet.close()
        assert log.read_text() == ""
        loud = start(s, network=True, errlog=errlog, register=False)
        loud.close()
    assert "'h' runs in the OS sandbox WITH network access" in log.read_text()
    s.close()


def test_a_server_that_cannot_start_in_the_sandbox_is_a_coded_error(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch, sandboxed: SandboxStatus
) -> None:
    from comal.ops import McpServerError

    s = house(tmp_path, elsewhere, monkeypatch, {})
    box = s.house.sandbox()
    assert box is not None
    hidden = tmp_path / "hidden.py"  # under the private /tmp, and not made readable
    shutil.copy(SERVER, hidden)
    with open(tmp_path / "err.log", "w") as errlog:
        server = McpServer("h", sys.executable, [str(hidden)], sandbox=box, errlog=errlog)
        with pytest.raises(McpServerError) as err:
            server.__enter__()
    assert err.value.code == "MCP_SERVER" and "readable_paths" in str(err.value)
    s.close()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"command": "srv", "network": "yes"}, "mcp_servers.web.network"),
        ({"command": "srv", "network": 1}, "mcp_servers.web.network"),
        ({"command": ""}, "mcp_servers.web.command"),
        ({"args": []}, "mcp_servers.web.command"),
        ({"command": "srv", "netwrok": True}, "mcp_servers.web.netwrok"),
        ({"command": "srv", "env": {"A B": "x"}}, "mcp_servers.web.env"),
        ({"command": "srv", "effects": {"t": ["explode"]}}, "mcp_servers.web.effects.t.0"),
    ],
)
def test_server_configuration_is_validated_with_a_coded_error(
    data: dict[str, Any], field: str
) -> None:
    with pytest.raises(InputError) as err:
        McpServer.from_config("web", data)
    assert err.value.code == "INPUT_ERROR" and err.value.field == field


def test_server_configuration_carries_the_network_flag(tmp_path: Path) -> None:
    quiet = McpServer.from_config("web", {"command": "srv", "cwd": str(tmp_path)})
    loud = McpServer.from_config(
        "web",
        {"command": "srv", "cwd": str(tmp_path), "network": True, "effects": {"t": ["read"]}},
    )
    assert quiet.sandbox.policy.network is False and loud.sandbox.policy.network is True
    assert loud.sandbox.root == tmp_path.resolve() and loud.effects["t"][0].kind == "read"
