"""Issue 9 §2: the sandbox's seccomp filter (libseccomp's BPF, loaded by bubblewrap).

A host daemon's Unix socket outside /tmp and /run is visible in the read-only root; without
the filter any sandboxed command could connect to it. With it, creating a Unix socket is
refused unless ``sandbox.unix_sockets`` allows it, and the kernel surfaces a tool has no
business with (ptrace, new user namespaces, mounts, the keyring, bpf, io_uring ...) answer
``EPERM``, while ordinary work (threads, subprocesses, socket pairs) runs.
"""

# covers: OPS-7

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _ops_support import ANA, call, make_setup
from comal.ops import Policy, SandboxStatus
from comal.ops._seccomp import DENIED_SYSCALLS, build_filter

PYTHON = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}")


@pytest.fixture
def daemon() -> Iterator[tuple[Path, list[bytes]]]:
    """A host daemon listening on a Unix socket under /var/tmp; it records what it hears."""
    base = Path("/var/tmp") / f"comal-sec-unix-{uuid.uuid4().hex}"
    base.mkdir(parents=True)
    path = base / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    server.settimeout(0.2)
    heard: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    heard.append(conn.recv(100))
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, heard
    stop.set()
    thread.join(5)
    server.close()
    shutil.rmtree(base, ignore_errors=True)


def bash(tmp_path: Path, command: str, sandbox: Any = None) -> tuple[str, dict[str, Any]]:
    config: dict[str, Any] = {"mode": "trusted"}
    if sandbox is not None:
        config["sandbox"] = sandbox
    s = make_setup(tmp_path, policy=Policy.from_config(config))
    outcome, receipt = s.house.handle(
        call("Bash", {"command": command, "timeout": 60}), ANA, surface="cli"
    )
    s.close()
    return outcome.result.text, dict(receipt.observations)


def talk(path: Path) -> str:
    script = (
        "import socket; s = socket.socket(socket.AF_UNIX); "
        f"s.connect({str(path)!r}); s.sendall(b'hello'); print('sent')"
    )
    return f'{PYTHON} -I -c "{script}"'


@pytest.mark.parametrize(
    ("sandbox", "reached"),
    [({}, False), ({"network": True}, False), ({"unix_sockets": True}, True), ("off", True)],
)
def test_a_host_daemons_unix_socket(
    tmp_path: Path,
    daemon: tuple[Path, list[bytes]],
    sandboxed: SandboxStatus,
    sandbox: Any,
    reached: bool,
) -> None:
    path, heard = daemon
    text, seen = bash(tmp_path, talk(path), sandbox)
    assert ("sent" in text) is reached, text
    if not reached:
        assert "Operation not permitted" in text and seen["sandbox"]["seccomp"] is True
    if sandbox != "off":
        assert seen["sandbox"]["unix_sockets"] is (sandbox == {"unix_sockets": True})
    deadline = 50
    while reached and not heard and deadline:
        threading.Event().wait(0.1)
        deadline -= 1
    assert (heard == [b"hello"]) is reached


def syscall(name: str, *args: str) -> str:
    """A command that makes one raw system call (``args`` are Python expressions) and prints
    its result and errno."""
    import pyseccomp  # type: ignore[import-untyped]

    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    call_args = ", ".join((str(number), *args))
    return (
        f'{PYTHON} -I -c "import ctypes, os; c = ctypes.CDLL(None, use_errno=True); '
        f"print('{name}', c.syscall({call_args}), os.strerror(ctypes.get_errno()))\""
    )


PROBES = {
    "new user namespace": "unshare -U true",
    # Each is harmless here and works unsandboxed: reading its own memory as a debugger
    # would, asking for its session keyring's id, a bpf call with no attributes (EFAULT).
    "process_vm_readv": syscall("process_vm_readv", "os.getpid()", "0", "0", "0", "0", "0"),
    "keyring": syscall("keyctl", "0", "-3"),
    "bpf": syscall("bpf", "0", "0", "0"),
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_kernel_surfaces_are_refused(tmp_path: Path, sandboxed: SandboxStatus, probe: str) -> None:
    text, _ = bash(tmp_path, PROBES[probe])
    assert "Operation not permitted" in text, text
    if probe != "new user namespace":  # unsandboxed as root, unshare -U simply works
        text, _ = bash(tmp_path, PROBES[probe], "off")
        assert "Operation not permitted" not in text, text


def test_ordinary_work_runs_under_the_filter(tmp_path: Path, sandboxed: SandboxStatus) -> None:
    script = (
        "import socket, subprocess, threading; a, b = socket.socketpair(); a.sendall(b'x');"
        " t = threading.Thread(target=lambda: print('thread', b.recv(1))); t.start(); t.join();"
        " print(subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout)"
    )
    text, seen = bash(tmp_path, f'{PYTHON} -I -c "{script}" && echo done')
    assert "thread b'x'" in text and "child" in text and "done" in text, text
    assert seen["exit_code"] == 0 and seen["sandbox"]["seccomp"] is True


def test_the_filter_is_built_for_each_setting() -> None:
    closed, opened = build_filter(), build_filter(unix_sockets=True)
    assert closed and opened and closed != opened
    assert len(closed) % 8 == 0  # a BPF program: 8-byte instructions
    assert {"ptrace", "mount", "keyctl", "bpf", "io_uring_setup"} <= set(DENIED_SYSCALLS)


def test_the_status_says_the_filter_is_on(sandboxed: SandboxStatus) -> None:
    assert "with its seccomp filter" in sandboxed.reason
    assert "memory cap 2,048 MiB per process" in sandboxed.reason
