"""Operations from MCP servers (stdio transport), judged like native ones.

:class:`McpServer` starts a server as a subprocess, lists its tools and turns each into an
:class:`~comal.ops.Operation` named ``mcp__<server>__<tool>``. The published schema is the
server's ``inputSchema``; arguments are validated against a pydantic model built from it (extra
keys forbidden, like every operation). Effects are ``unknown`` unless configured per tool, and
every receipt says ``effects: unknown`` for what the house cannot observe (OPS-5). A call that is
interrupted has no postcondition adapter and stays uncertain (RES-4).

The server process runs in the OS sandbox (:mod:`._sandbox`), the same bubblewrap box and
policy as Bash: the root read-only, the workspace writable, comal's configuration, ledger and
keys masked, its own PID namespace (the server and everything it starts die when it is
stopped or comal dies: ``--die-with-parent``), capabilities dropped and the memory cap. Its
network is its own setting, off unless its configuration says ``network: true`` (and the
operator is told at start). Its environment is what the server's configuration names plus
the SDK's ``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM`` and ``USER``: nothing else of
comal's environment, so no API key, reaches it.

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
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ..errors import InputError
from ..messages import canonical_json
from ._errors import McpServerError, OperationTimeout, SandboxUnavailable, ToolFailure
from ._mcp_config import SERVER_NAME, McpServerConfig
from ._model import CallContext, Effect, ToolOutput
from ._operation import LARGE_CAP, Handler, Operation
from ._sandbox import Sandbox, SandboxPolicy, default_protected_paths

__all__ = ["McpServer", "McpServerConfig", "model_from_schema"]

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
    """A running stdio MCP server; use it as a context manager around the house's life.

    The server runs in ``sandbox`` (the house's: ``House.sandbox()``), with its own
    ``network`` setting, off by default. Without a sandbox given, a default one is built over
    ``cwd`` (or the current directory) hiding comal's own files. Where the machine has no
    usable sandbox the rule is Bash's (``Sandbox.refuses_unapproved``): the server is not
    started unless the operator opted out (``sandbox.enabled = false`` or
    ``sandbox.allow_unsandboxed``).
    """

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
        sandbox: Sandbox | None = None,
        network: bool = False,
        readable_paths: Sequence[str | Path] = (),
    ) -> None:
        if not re.fullmatch(SERVER_NAME, name):
            raise McpServerError(f"MCP server name {name!r} must match [A-Za-z0-9_-]{{1,24}}")
        self.name = name
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env else None
        if sandbox is None:
            root = Path(cwd) if cwd is not None else Path.cwd()
            sandbox = Sandbox(SandboxPolicy(), root.resolve(), default_protected_paths())
        self.sandbox = sandbox.for_server(network, readable_paths)
        self.cwd = Path(cwd) if cwd is not None else self.sandbox.root
        self.params = StdioServerParameters(
            command=command, args=self.args, env=self.env, cwd=self.cwd
        )
        self.effects = dict(effects or {})
        self._errlog = errlog
        self._stack: ExitStack | None = None
        self._portal: BlockingPortal | None = None
        self._client: Client | None = None
        self.tools: tuple[mcp_types.Tool, ...] = ()

    @classmethod
    def from_config(
        cls,
        name: str,
        data: Mapping[str, Any],
        *,
        sandbox: Sandbox | None = None,
        errlog: TextIO | None = None,
        where: str = "mcp_servers",
    ) -> McpServer:
        """A server from its configuration entry, validated; an error names ``where.name.key``."""
        try:
            cfg = McpServerConfig.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            raise InputError(
                f"bad MCP server setting: {first['msg']}; fix the value or remove the key",
                field=f"{where}.{name}" + (f".{key}" if key else ""),
            ) from exc
        return cls.configured(name, cfg, sandbox=sandbox, errlog=errlog)

    @classmethod
    def configured(
        cls,
        name: str,
        cfg: McpServerConfig,
        *,
        sandbox: Sandbox | None = None,
        errlog: TextIO | None = None,
    ) -> McpServer:
        """A server from an already validated entry (the agent's configuration holds them)."""
        return cls(
            name,
            cfg.command,
            cfg.args,
            env=cfg.env,
            cwd=cfg.cwd,
            effects={tool: tuple(Effect(k) for k in kinds) for tool, kinds in cfg.effects.items()},
            errlog=errlog,
            sandbox=sandbox,
            network=cfg.network,
            readable_paths=cfg.readable_paths,
        )

    @property
    def sandboxed(self) -> bool:
        """Whether the server runs (or would run) inside the OS sandbox."""
        return self.sandbox.active

    def sandbox_info(self) -> dict[str, Any]:
        """What the sandbox allows this server, for receipts and the operator."""
        box = self.sandbox
        if not box.active:
            return {"active": False, "reason": box.status.reason}
        return {
            "active": True,
            "backend": box.status.backend,
            "network": box.policy.network,
            "memory_cap": box.policy.memory_cap,
            "seccomp": box.seccomp()[0] is not None,
            "unix_sockets": box.policy.unix_sockets,
            "unprotected": box.unprotected,
        }

    def notice(self) -> str | None:
        """What the operator must be told at start: the server has the network, or runs
        without the sandbox."""
        if not self.sandbox.active:
            return (
                f"comal: MCP server {self.name!r} runs WITHOUT the OS sandbox "
                f"({self.sandbox.status.reason})"
            )
        if self.sandbox.policy.network:
            return (
                f"comal: MCP server {self.name!r} runs in the OS sandbox WITH network access "
                "(network: true in its configuration)"
            )
        return None

    def _launch(self) -> StdioServerParameters:
        box = self.sandbox
        if box.refuses_unapproved:
            raise SandboxUnavailable(
                f"MCP server {self.name!r} must run in the OS sandbox and this machine has none "
                f"({box.status.reason}); it was not started. Install bubblewrap, or the "
                "operator may set sandbox.allow_unsandboxed"
            )
        if not box.active:
            return self.params
        argv = box.launch_argv([self.command, *self.args], self.cwd)
        return StdioServerParameters(command=argv[0], args=argv[1:], env=self.env, cwd=self.cwd)

    def __enter__(self) -> Self:
        params = self._launch()
        errlog = self._errlog or sys.stderr
        notice = self.notice()
        if notice is not None:
            print(notice, file=errlog, flush=True)
        stack = ExitStack()
        try:
            self._portal = stack.enter_context(start_blocking_portal())
            transport = stdio_client(params, errlog=errlog)
            self._client = stack.enter_context(
                self._portal.wrap_async_context_manager(Client(transport, cache=None))
            )
            self.tools = tuple(self._list())
        except Exception as exc:
            stack.close()
            boxed = (
                " (it runs in the OS sandbox: read-only outside the workspace, /tmp and /run "
                "private unless readable_paths shows them, no network unless its "
                "configuration says network: true; its error log says more)"
                if self.sandbox.active
                else ""
            )
            raise McpServerError(
                f"MCP server {self.name!r} ({self.command}) could not start or list its "
                f"tools: {exc}; check the command{boxed}"
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
                    sandboxed=True,
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
        seen["sandbox"] = self.sandbox_info()
        return ToolOutput("\n".join(texts), is_error=result.is_error, observations=seen)
