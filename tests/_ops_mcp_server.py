"""A small stdio MCP server for the house's tests (run as a subprocess by the MCP client).

Tools: ``echo`` (text, times), ``add`` (a, b), ``note`` (appends a line to the file named by
the ``OPS_MCP_NOTES`` environment variable: a side effect the house cannot observe), ``calls``
(how many tool calls this server has answered) and ``slow`` (sleeps).
"""

from __future__ import annotations

import os
import time

from mcp.server import MCPServer

server = MCPServer("ops-test")
answered = 0


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat text."""
    global answered
    answered += 1
    return text * times


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    global answered
    answered += 1
    return a + b


@server.tool()
def note(line: str) -> str:
    """Append a line to the notes file."""
    global answered
    answered += 1
    with open(os.environ["OPS_MCP_NOTES"], "a") as fh:
        fh.write(line + "\n")
    return "noted"


@server.tool()
def calls() -> int:
    """How many other tool calls this server has answered."""
    return answered


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    server.run()
