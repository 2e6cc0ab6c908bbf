"""The stdio transport with a screen on tool listings, so one bad tool costs only itself.

The MCP SDK validates a ``tools/list`` answer as a whole: one tool whose declaration breaks the
protocol's schema (``properties`` a list, ``required`` holding numbers, a name that is not a
string) makes it refuse the page, and with it every other tool of the server. The screen sits
between the server's stdout and the SDK: it checks each listed tool the way the SDK would for
the negotiated protocol version, takes out the ones it would refuse and remembers why
(:attr:`ToolScreen.refused`), so each is refused alone with a coded error naming it
(:class:`~comal.ops.McpToolRefused`) and the others load.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._transport import ReadStream, Transport, TransportStreams
from mcp.shared.message import SessionMessage
from mcp_types import methods
from mcp_types.jsonrpc import JSONRPCResponse
from pydantic import ValidationError

__all__ = ["ToolScreen", "screened"]


def _problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"][2:]) or "the tool"  # past ("tools", index)
    return f"its declaration breaks the MCP schema at {where}: {first['msg']}"


class ToolScreen:
    """What the screen took out of tool listings: ``(tool name, why)`` pairs. It acts once
    told the negotiated protocol version (listings come after the handshake)."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.refused: list[tuple[str, str]] = []

    def _check(self, page: dict[str, Any], tool: Any) -> str | None:
        assert self.version is not None
        try:
            methods.parse_server_result("tools/list", self.version, page | {"tools": [tool]})
        except ValidationError as exc:
            return _problem(exc)
        except (KeyError, ValueError):
            return None  # a version or method the SDK does not check: nothing to screen
        return None

    def message(self, item: SessionMessage) -> SessionMessage:
        answer = item.message
        if self.version is None or not isinstance(answer, JSONRPCResponse):
            return item
        tools = answer.result.get("tools")
        if not isinstance(tools, list):
            return item
        kept = []
        for tool in tools:
            problem = self._check(answer.result, tool)
            if problem is None:
                kept.append(tool)
                continue
            name = tool.get("name") if isinstance(tool, dict) else None
            self.refused.append((name if isinstance(name, str) else repr(name)[:100], problem))
        if len(kept) == len(tools):
            return item
        screened_answer = answer.model_copy(update={"result": answer.result | {"tools": kept}})
        return SessionMessage(screened_answer, metadata=item.metadata)


async def _forward(
    read: ReadStream[SessionMessage | Exception],
    send: MemoryObjectSendStream[SessionMessage | Exception],
    screen: ToolScreen,
) -> None:
    async with read, send:
        try:
            async for item in read:
                await send.send(screen.message(item) if isinstance(item, SessionMessage) else item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the session left: closing both ends tells the transport


@asynccontextmanager
async def screened(inner: Transport, screen: ToolScreen) -> AsyncIterator[TransportStreams]:
    """``inner`` with every message from the server passed through ``screen``."""
    async with inner as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outer: MemoryObjectReceiveStream[SessionMessage | Exception] = receive
        async with anyio.create_task_group() as group, outer:
            group.start_soon(_forward, read, send, screen)
            try:
                yield outer, write
            finally:
                group.cancel_scope.cancel()
