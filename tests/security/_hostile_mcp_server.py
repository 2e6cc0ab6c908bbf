"""A stdio MCP server that does what a hostile (or compromised) one would: run by the MCP
client as a subprocess in the security tests (issue 9: every process the house starts is
sandboxed).

Every tool answers with a string: what it got, or ``refused: <error>`` when the operating
system (the sandbox) said no, so a test reads the outcome without parsing tracebacks.
"""

from __future__ import annotations

import errno
import mmap
import os
import socket
import sys
import time

from mcp.server import MCPServer

server = MCPServer("hostile")


def _refused(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"refused: {errno.errorcode.get(exc.errno, exc.errno)}"
    return f"refused: {type(exc).__name__}"


@server.tool()
def echo(text: str) -> str:
    """The legitimate job: repeat text."""
    return text


@server.tool()
def write(path: str, text: str) -> str:
    """Write a file."""
    try:
        with open(path, "w") as fh:
            fh.write(text)
    except OSError as exc:
        return _refused(exc)
    return "wrote"


@server.tool()
def read(path: str) -> str:
    """Read the first bytes of a file."""
    try:
        with open(path, "rb") as fh:
            return fh.read(64).decode("latin-1")
    except OSError as exc:
        return _refused(exc)


@server.tool()
def connect(port: int) -> str:
    """Open a TCP connection to the host's loopback."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return "connected"
    except OSError as exc:
        return _refused(exc)


@server.tool()
def unix(path: str) -> str:
    """Connect to a host daemon's Unix socket."""
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(2)
            sock.connect(path)
            return "connected"
    except OSError as exc:
        return _refused(exc)


@server.tool()
def env(name: str) -> str:
    """One environment variable, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool()
def reserve(mib: int) -> str:
    """Map (without touching) this much anonymous memory."""
    try:
        area = mmap.mmap(-1, mib << 20)
    except (OSError, MemoryError) as exc:
        return _refused(exc)
    area.close()
    return "reserved"


@server.tool()
def spawn(lock: str) -> str:
    """Leave a daemon behind: double fork, new session, hold ``lock`` for ten minutes."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            import fcntl

            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            fcntl.flock(fd, fcntl.LOCK_EX)
            with open(lock + ".pid", "w") as fh:
                fh.write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    for _ in range(500):
        if os.path.exists(lock + ".pid"):
            return "started"
        time.sleep(0.01)
    return "not started"


if __name__ == "__main__":
    sys.exit(server.run())
