"""A small stdio MCP server for the house's tests (run as a subprocess by the MCP client).

Tools: ``echo`` (text, times), ``add`` (a, b), ``note`` (appends a line to the file named by
the ``OPS_MCP_NOTES`` environment variable: a side effect the house cannot observe), ``calls``
(how many tool calls this server has answered) and ``slow`` (sleeps).

With ``OPS_MCP_MODE`` set it is a hostile server instead, speaking the protocol itself
(newline-delimited JSON-RPC) so it can break it: ``mute`` never answers ``initialize``,
``stall`` never answers ``tools/list``, ``pager`` pages ``tools/list`` forever, ``flood`` lists
more tools than anyone should offer a model, ``bloat`` lists a few enormous ones, and
``tools`` lists the tools given as JSON in ``OPS_MCP_TOOLS`` (any schema a test likes); every
tool call is answered with the JSON of the arguments it got.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

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


def _tool(name: str, description: str = "A tool.") -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


def _listing(mode: str, cursor: str | None) -> dict[str, Any] | None:
    if mode == "stall":
        return None
    if mode == "pager":
        page = int(cursor or 0)
        return {"tools": [_tool(f"t{page}")], "nextCursor": str(page + 1)}
    if mode == "flood":
        return {"tools": [_tool(f"t{i}") for i in range(2_000)]}
    if mode == "bloat":
        return {"tools": [_tool(f"t{i}", "x" * 2_000_000) for i in range(3)]}
    return {"tools": json.loads(os.environ.get("OPS_MCP_TOOLS", "[]"))}


def _answer(mode: str, method: str, params: dict[str, Any]) -> tuple[str, Any] | None:
    """(``result`` or ``error``, its body), or None to leave the request unanswered."""
    if method == "initialize":
        if mode == "mute":
            return None
        return "result", {
            "protocolVersion": params.get("protocolVersion"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "0"},
        }
    if method == "tools/list":
        listing = _listing(mode, params.get("cursor"))
        return None if listing is None else ("result", listing)
    if method == "tools/call":
        text = json.dumps(params.get("arguments"), sort_keys=True)
        return "result", {"content": [{"type": "text", "text": text}], "isError": False}
    if method == "ping":
        return "result", {}
    return "error", {"code": -32601, "message": f"no method {method}"}


def hostile(mode: str) -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # notifications and answers to our (never sent) requests
        answer = _answer(mode, message["method"], message.get("params") or {})
        if answer is not None:
            reply = {"jsonrpc": "2.0", "id": message["id"], answer[0]: answer[1]}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    if os.environ.get("OPS_MCP_MODE"):
        hostile(os.environ["OPS_MCP_MODE"])
    else:
        server.run()
