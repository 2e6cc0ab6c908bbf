"""Operations from MCP servers (stdio transport), judged like native ones.

:class:`McpServer` starts a server as a subprocess, lists its tools and turns each into an
:class:`~comal.ops.Operation` named ``mcp__<server>__<tool>``. The published schema is the
server's ``inputSchema``; arguments are validated against a pydantic model built from it (extra
keys forbidden, like every operation). Effects are ``unknown`` unless configured per tool, and
every receipt says ``effects: unknown`` for what the house cannot observe (OPS-5). A call that is
interrupted has no postcondition adapter and stays uncertain (RES-4).

The house is synchronous; the MCP client is async. The client lives on an event loop in a
background thread (an anyio blocking portal), and calls cross to it with their time limit.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal, Self, TextIO

import mcp_types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, create_model

from ..messages import canonical_json
from ._errors import McpServerError, OperationTimeout, ToolFailure
from ._model import CallContext, Effect, ToolOutput
from ._operation import LARGE_CAP, Handler, Operation

__all__ = ["McpServer", "model_from_schema"]

_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": int | float,  # keep 1 as 1: the server gets the numbers the model sent
    "boolean": bool,
    "array": list[Any],
    "object": dict[str, Any],
    "null": type(None),
}


def _field_type(schema: Mapping[str, Any]) -> Any:
    if schema.get("enum"):
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _JSON_TYPES:
        return _JSON_TYPES[kind]
    return Any  # unions and composite keywords: the server validates what we cannot express


def model_from_schema(name: str, schema: Mapping[str, Any]) -> type[BaseModel]:
    """A strict pydantic model for a JSON Schema object: known property types, required keys,
    no extra keys. Optional keys default to unset and are not sent."""
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    fields: dict[str, Any] = {}
    for key, sub in props.items():
        kind = _field_type(sub if isinstance(sub, Mapping) else {})
        fields[key] = (kind, ...) if key in required else (kind | None, None)
    config = ConfigDict(extra="forbid", strict=True, frozen=True)
    model: type[BaseModel] = create_model(name, __config__=config, **fields)
    return model


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


class McpServer:
    """A running stdio MCP server; use it as a context manager around the house's life."""

    def __init__(
        self,
        name: str,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        effects: Mapping[str, tuple[Effect, ...]] | None = None,
        errlog: TextIO | None = None,
    ) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,24}", name):
            raise McpServerError(f"MCP server name {name!r} must match [A-Za-z0-9_-]{{1,24}}")
        self.name = name
        self.params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
        )
        self.effects = dict(effects or {})
        self._errlog = errlog
        self._stack: ExitStack | None = None
        self._portal: BlockingPortal | None = None
        self._client: Client | None = None
        self.tools: tuple[mcp_types.Tool, ...] = ()

    def __enter__(self) -> Self:
        stack = ExitStack()
        try:
            self._portal = stack.enter_context(start_blocking_portal())
            transport = stdio_client(self.params, errlog=self._errlog or sys.stderr)
            self._client = stack.enter_context(
                self._portal.wrap_async_context_manager(Client(transport, cache=None))
            )
            self.tools = tuple(self._list())
        except Exception as exc:
            stack.close()
            raise McpServerError(
                f"MCP server {self.name!r} ({self.params.command}) could not start or list its "
                f"tools: {exc}; check the command"
            ) from exc
        self._stack = stack
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = self._portal = self._client = None

    def _list(self) -> list[mcp_types.Tool]:
        assert self._portal is not None and self._client is not None
        client = self._client
        tools: list[mcp_types.Tool] = []
        page = self._portal.call(lambda: client.list_tools())
        tools.extend(page.tools)
        while page.next_cursor:
            after = page.next_cursor
            page = self._portal.call(functools.partial(client.list_tools, cursor=after))
            tools.extend(page.tools)
        return tools

    def operation_name(self, tool: str) -> str:
        return f"mcp__{self.name}__{_safe(tool)}"[:64]

    def operations(self) -> list[Operation]:
        ops = []
        for tool in self.tools:
            name = self.operation_name(tool.name)
            ops.append(
                Operation(
                    name,
                    tool.description or f"MCP tool {tool.name} of server {self.name}.",
                    model_from_schema(name, tool.input_schema),
                    self._handler(tool.name),
                    effects=self.effects.get(tool.name, (Effect("unknown"),)),
                    inline_cap=LARGE_CAP,
                    schema=tool.input_schema,
                    surfaces=frozenset({"model", "cli", "tui", "api"}),
                )
            )
        return ops

    def _handler(self, tool: str) -> Handler:
        def handler(args: BaseModel, ctx: CallContext) -> ToolOutput:
            return self.call(tool, args.model_dump(mode="json", exclude_unset=True), ctx.timeout)

        return handler

    def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> ToolOutput:
        if self._portal is None or self._client is None:
            raise ToolFailure(f"MCP server {self.name!r} is not running")
        client = self._client
        seen: dict[str, Any] = {"effects": "unknown", "server": self.name, "tool": tool}
        try:
            result = self._portal.call(
                lambda: client.call_tool(tool, arguments, read_timeout_seconds=timeout)
            )
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise OperationTimeout(
                    f"MCP tool {tool} did not answer within {timeout:g}s; its effects are unknown"
                ) from exc
            raise ToolFailure(f"MCP server {self.name!r} refused {tool}: {exc.message}") from exc
        texts: list[str] = []
        for block in result.content:
            if isinstance(block, mcp_types.TextContent):
                texts.append(block.text)
            else:
                texts.append(block.model_dump_json(by_alias=True, exclude_none=True))
        if not texts and result.structured_content is not None:
            texts.append(canonical_json(result.structured_content))
        seen["is_error"] = result.is_error
        return ToolOutput("\n".join(texts), is_error=result.is_error, observations=seen)
