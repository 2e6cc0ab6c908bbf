"""Issue 18: an MCP server is untrusted from its first byte, its start included.

A real stdio server (``tests/_ops_mcp_server.py`` in a hostile mode, speaking JSON-RPC itself)
never answers ``initialize``, never answers ``tools/list``, pages it forever, lists thousands
of tools or megabytes of them, or declares tools whose schemas comal once could not take (an
``enum`` of lists crashed the start with ``TypeError: unhashable type``). Each bound is a coded
error naming the server, and the agent goes on without it; each bad tool is refused with a
coded error naming the server and the tool, and the server's other tools still load.
"""

# covers: OPS-1, OPS-2, CFG-1

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import mcp_types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage
from mcp_types import methods
from mcp_types.jsonrpc import JSONRPCResponse

from comal.agent import Config, Flags, Runtime
from comal.ledger import open_ledger
from comal.ops import (
    McpLimits,
    McpListingTooLarge,
    McpServer,
    McpServerError,
    McpServerTimeout,
    McpToolRefused,
    SandboxStatus,
)
from comal.ops._mcp_wire import ToolScreen
from comal.providers import ModelRequest
from comal.testing import FunctionProvider
from security._sec_support import finishes

SERVER = Path(__file__).parents[1] / "_ops_mcp_server.py"
# The server's Python and script, shown read-only even when the clone lives under /tmp.
READABLE = [sys.prefix, sys.base_prefix, str(SERVER.parent)]
MODEL = "anthropic:claude-sonnet-4-6"
# Long enough for a loaded machine to start a Python server; the timeouts under test are short.
PATIENT = McpLimits(handshake_s=60, listing_s=60)


def _hostile(mode: str, tools: list[dict[str, Any]] | None = None) -> dict[str, str]:
    return {"OPS_MCP_MODE": mode, "OPS_MCP_TOOLS": json.dumps(tools or [])}


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with (tmp_path / "server.log").open("a") as log:
        yield log


def _start(tmp_path: Path, errlog: TextIO, env: dict[str, str], limits: McpLimits) -> McpServer:
    server = McpServer(
        "h",
        sys.executable,
        [str(SERVER)],
        env=env,
        cwd=tmp_path,
        readable_paths=READABLE,
        limits=limits,
        errlog=errlog,
    )
    return server.__enter__()


def _refused_start(
    tmp_path: Path, errlog: TextIO, env: dict[str, str], limits: McpLimits
) -> McpServerError:
    """Start a server that must be refused; the start must end, and with a coded error."""
    got: list[BaseException] = []

    def start() -> None:
        try:
            _start(tmp_path, errlog, env, limits).close()
        except BaseException as exc:
            got.append(exc)

    began = time.monotonic()
    assert finishes(start, 90), "the start hung"
    assert got, "the hostile server was started"
    assert isinstance(got[0], McpServerError), repr(got[0])
    assert time.monotonic() - began < 60
    return got[0]


def test_a_server_that_never_answers_initialize_is_stopped(
    tmp_path: Path, errlog: TextIO, sandboxed: SandboxStatus
) -> None:
    limits = McpLimits(handshake_s=3, listing_s=60)
    err = _refused_start(tmp_path, errlog, _hostile("mute"), limits)
    assert isinstance(err, McpServerTimeout) and err.code == "MCP_SERVER_TIMEOUT"
    assert err.server == "h" and err.phase == "handshake"
    assert "'h'" in str(err) and "start_timeout" in str(err)


def test_a_server_that_never_lists_its_tools_is_stopped(
    tmp_path: Path, errlog: TextIO, sandboxed: SandboxStatus
) -> None:
    limits = McpLimits(handshake_s=60, listing_s=3)
    err = _refused_start(tmp_path, errlog, _hostile("stall"), limits)
    assert isinstance(err, McpServerTimeout) and err.phase == "listing" and err.server == "h"


@pytest.mark.parametrize(
    ("mode", "limit"), [("pager", "pages"), ("flood", "tools"), ("bloat", "bytes")]
)
def test_a_listing_past_its_bounds_is_refused(
    tmp_path: Path, errlog: TextIO, sandboxed: SandboxStatus, mode: str, limit: str
) -> None:
    err = _refused_start(tmp_path, errlog, _hostile(mode), PATIENT)
    assert isinstance(err, McpListingTooLarge) and err.code == "MCP_LISTING_LIMIT"
    assert err.server == "h" and err.limit == limit and "'h'" in str(err)


# Tools whose schemas once crashed the start or cost the server all its tools.
BAD_TOOLS = {
    "enum_of_lists": {"type": "object", "properties": {"x": {"enum": [[1], [2]]}}},
    "enum_of_objects": {"type": "object", "properties": {"x": {"enum": [{"a": 1}, None]}}},
    "properties_a_list": {"type": "object", "properties": [1, 2]},
    "required_numbers": {"type": "object", "required": [1]},
    "schema_a_list": {"type": "object", "$schema": [1]},
    "not_an_object": {"type": "string"},
    "enum_a_number": {"type": "object", "properties": {"x": {"enum": 5}}},
    "huge_number": {"type": "object", "properties": {"x": {"maximum": 10**30}}},
    "deep": {"type": "object", "properties": {"x": json.loads('{"items":' * 60 + "{}" + "}" * 60)}},
}
# Lists are fine in JSON Schema's enum; these load and are judged like any other.
GOOD_TOOLS = {
    "echo": {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "model_dump": {"type": "string"},  # a name pydantic keeps for itself
            "a-b": {"type": "integer"},
            "pick": {"enum": [[1, 2], {"k": "v"}, "s"]},
        },
        "required": ["text"],
    },
}
ACCEPTED = {"enum_of_lists", "enum_of_objects"}


def _tools() -> list[dict[str, Any]]:
    declared = {**BAD_TOOLS, **GOOD_TOOLS}
    return [{"name": name, "inputSchema": schema} for name, schema in declared.items()]


def test_each_bad_tool_is_refused_alone_and_the_others_load(
    tmp_path: Path, errlog: TextIO, sandboxed: SandboxStatus
) -> None:
    server = _start(tmp_path, errlog, _hostile("tools", _tools()), PATIENT)
    try:
        loaded = {server.tool_of(op.name) for op in server.operations()}
        refused = {r.tool: r for r in server.refused}
        assert loaded == set(GOOD_TOOLS) | ACCEPTED
        assert set(refused) == set(BAD_TOOLS) - ACCEPTED
        for tool, err in refused.items():
            assert isinstance(err, McpToolRefused) and err.code == "MCP_TOOL_REFUSED"
            assert err.server == "h" and f"'{tool}'" in str(err) and "'h'" in str(err)
        # What the model sends is validated, then reaches the server key for key.
        echo = next(op for op in server.operations() if op.name == "mcp__h__echo")
        args = {"text": "hi", "model_dump": "m", "a-b": 2, "pick": {"k": "v"}}
        sent = echo.input.model_validate(args).model_dump(mode="json", exclude_unset=True)
        assert json.loads(server.call("echo", sent, 30).text) == args
        with pytest.raises(ValueError):
            echo.input.model_validate({"text": "hi", "pick": [2, 1]})
    finally:
        server.close()


def test_the_agent_goes_on_without_a_server_that_hangs_or_a_tool_refused(
    tmp_path: Path, sandboxed: SandboxStatus
) -> None:
    # covers: OPS-1, OPS-5
    ws = tmp_path / "ws"
    ws.mkdir()

    def entry(env: dict[str, str], **extra: Any) -> dict[str, Any]:
        return {"command": sys.executable, "args": [str(SERVER)], "env": env,
                "readable_paths": READABLE} | extra  # fmt: skip

    config = Config(
        mode="trusted",
        mcp_servers={
            "mute": entry(_hostile("mute"), start_timeout=3),
            "good": entry(_hostile("tools", _tools()), start_timeout=60),
        },
    )
    provider = FunctionProvider(lambda r: {"content": [{"type": "text", "text": "done"}]})
    said: list[tuple[str, str]] = []
    led = open_ledger(tmp_path / "l.db")
    rt = Runtime.open(led, Flags(model=MODEL, workspace=ws), config=config, provider=provider)
    outcome: list[Any] = []
    with rt.closing():
        assert finishes(lambda: outcome.append(rt.run("hello", say=lambda *a: said.append(a))), 90)
        assert outcome[0].status == "finished", outcome[0].error
        events = {e.body["server"]: e.body for e in led.records(rt.need_scope(), "event")
                  if e.kind == "mcp_started"}  # fmt: skip
    led.close()
    assert events["mute"]["error"]["code"] == "MCP_SERVER_TIMEOUT" and events["mute"]["tools"] == []
    assert "'mute'" in events["mute"]["notice"]
    assert set(events["good"]["tools"]) == set(GOOD_TOOLS) | ACCEPTED
    refused = {r["tool"]: r["code"] for r in events["good"]["refused"]}
    assert refused == dict.fromkeys(set(BAD_TOOLS) - ACCEPTED, "MCP_TOOL_REFUSED")
    sent = _names(provider.calls[0])
    assert "mcp__good__echo" in sent and not any(n.startswith("mcp__mute") for n in sent)
    assert any(kind == "warn" and "'mute'" in text for kind, text in said)


def _names(request: ModelRequest) -> list[str]:
    return [str(t["name"]) for t in request.tools]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
KEYWORDS = st.sampled_from(
    ["type", "properties", "required", "enum", "items", "$schema", "$ref", "anyOf", "default"]
)
SCHEMA = st.dictionaries(KEYWORDS | st.text(max_size=4), JSON, max_size=5).map(
    lambda d: d | {"type": "object"} if len(d) % 2 else d
)
PROPERTY = st.dictionaries(KEYWORDS, JSON, max_size=3)
OBJECT_SCHEMA = st.builds(
    lambda props, required: {"type": "object", "properties": props, "required": required},
    st.dictionaries(st.text(max_size=12), PROPERTY, max_size=4),
    st.lists(st.text(max_size=12), max_size=3),
)
TOOL = st.fixed_dictionaries(
    {"name": st.text(max_size=10) | JSON, "inputSchema": SCHEMA | OBJECT_SCHEMA | JSON}
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TOOL, max_size=4))
def test_any_tool_listing_is_loaded_or_refused_tool_by_tool(tools: list[dict[str, Any]]) -> None:
    """Whatever a server lists, every tool either becomes an operation or is refused with a
    code naming the server and the tool; nothing else escapes."""
    screen = ToolScreen()
    screen.version = "2025-11-25"
    answer = JSONRPCResponse(jsonrpc="2.0", id=1, result={"tools": tools})
    kept = screen.message(SessionMessage(answer)).message
    assert isinstance(kept, JSONRPCResponse)
    page = methods.parse_server_result("tools/list", "2025-11-25", kept.result)
    assert isinstance(page, mcp_types.ListToolsResult)
    server = McpServer("h", "unused")
    server._screen = screen
    operations, refused = server._build(page.tools)
    assert len(operations) + len(refused) == len(tools)
    for err in refused:
        assert err.code == "MCP_TOOL_REFUSED" and err.server == "h"
        assert err.tool[:100] in str(err) or repr(err.tool[:100]) in str(err)
