"""Operations from MCP servers (stdio transport), judged like native ones.

:class:`McpServer` starts a server as a subprocess, lists its tools and turns each into an
:class:`~comal.ops.Operation` named ``mcp__<server>__<tool>``. The published schema is the
server's ``inputSchema``; arguments are validated against a pydantic model built from it (extra
keys forbidden, like every operation). Effects are ``unknown`` unless configured per tool, and
every receipt says ``effects: unknown`` for what the house cannot observe (OPS-5). A call that a
crash interrupted has no postcondition adapter and stays uncertain (RES-4); one a person stops
(``CallContext.stop``) is cancelled — the client sends the server ``notifications/cancelled``
— and its receipt says ``interrupted``, its effects unknown.

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

A server is untrusted input from its first byte. Its start is bounded (:class:`McpLimits`):
the handshake and the tool listing each have a time limit, and the listing a number of pages,
of tools and of bytes; passing one is a coded error naming the server
(:class:`~comal.ops.McpServerTimeout`, :class:`~comal.ops.McpListingTooLarge`) and the server
is stopped. Each tool's schema is accepted or refused on its own (:mod:`._mcp_schema`): a
refused tool is in :attr:`McpServer.refused` with its code, and the others load.
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
import re
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Self, TextIO

import anyio
import mcp_types
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from ..errors import InputError
from ..messages import canonical_json
from ._errors import (
    McpListingTooLarge,
    McpServerError,
    McpServerTimeout,
    McpToolRefused,
    OperationDeclarationError,
    OperationTimeout,
    SandboxUnavailable,
    ToolFailure,
)
from ._mcp_config import SERVER_NAME, McpLimits, McpServerConfig
from ._mcp_schema import model_from_schema, schema_problem
from ._mcp_wire import ToolScreen, screened
from ._model import CallContext, Effect, ToolOutput
from ._operation import LARGE_CAP, Handler, Operation
from ._running import StopSignal, interrupted_note
from ._sandbox import Sandbox, SandboxPolicy, default_protected_paths

__all__ = ["McpLimits", "McpServer", "McpServerConfig", "model_from_schema"]


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

    ``limits`` bounds its start (:class:`McpLimits`). After a start, :meth:`operations` are
    the tools whose schemas were accepted and :attr:`refused` says why each other one was not.
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
        limits: McpLimits | None = None,
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
        self.limits = limits if limits is not None else McpLimits()
        self._errlog = errlog
        self._stack: ExitStack | None = None
        self._portal: BlockingPortal | None = None
        self._client: Client | None = None
        self.tools: tuple[mcp_types.Tool, ...] = ()
        self.refused: tuple[McpToolRefused, ...] = ()
        self._operations: tuple[Operation, ...] = ()
        self._tool_of: dict[str, str] = {}
        self._screen = ToolScreen()

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
            limits=McpLimits(handshake_s=cfg.start_timeout, listing_s=cfg.start_timeout),
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
            portal = stack.enter_context(start_blocking_portal())
            served, (client, tools, stop) = portal.start_task(self._serve, params, errlog)
            stack.callback(_stop_serving, portal, served, stop)
        except McpServerError:
            stack.close()
            raise
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
                f"tools: {_reason(exc)}; check the command{boxed}",
                server=self.name,
            ) from exc
        self._portal, self._client, self._stack = portal, client, stack
        self.tools = tuple(tools)
        self._operations, self.refused = self._build(self.tools)
        return self

    async def _serve(
        self,
        params: StdioServerParameters,
        errlog: TextIO,
        *,
        task_status: TaskStatus[tuple[Client, list[mcp_types.Tool], anyio.Event]],
    ) -> None:
        """The client's life on the portal's loop: handshake and listing under their time
        limits, then wait until told to stop. The client is entered and left inside the one
        cancel scope whose deadline bounds the start, so a deadline unwinds it cleanly."""
        limits, stop, phase = self.limits, anyio.Event(), "handshake"
        refused: McpServerError | None = None
        screen = self._screen = ToolScreen()
        transport = screened(stdio_client(params, errlog=errlog), screen)
        with anyio.CancelScope(deadline=anyio.current_time() + limits.handshake_s) as scope:
            async with Client(transport, cache=None) as client:
                phase = "listing"
                screen.version = client.protocol_version
                scope.deadline = anyio.current_time() + limits.listing_s
                try:
                    tools = await self._list(client)
                except McpServerError as exc:
                    refused = exc  # raised once out of the client: its task group would wrap it
                else:
                    scope.deadline = math.inf
                    task_status.started((client, tools, stop))
                    await stop.wait()
        if refused is not None:
            raise refused
        if scope.cancelled_caught:
            seconds = limits.handshake_s if phase == "handshake" else limits.listing_s
            what = "answer its handshake" if phase == "handshake" else "list its tools"
            raise McpServerTimeout(
                f"MCP server {self.name!r} ({self.command}) did not {what} within "
                f"{seconds:g}s; it was stopped. Check the server, or raise its start_timeout",
                server=self.name,
                phase=phase,
            )

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = self._portal = self._client = None

    async def _list(self, client: Client) -> list[mcp_types.Tool]:
        limits = self.limits
        tools: list[mcp_types.Tool] = []
        size = 0
        cursor: str | None = None
        for _ in range(limits.pages):
            page = await client.list_tools(cursor=cursor)
            size += len(page.model_dump_json(by_alias=True).encode())
            tools.extend(page.tools)
            if len(tools) > limits.tools:
                raise self._too_large("tools", f"more than {limits.tools} tools")
            if size > limits.bytes:
                raise self._too_large("bytes", f"more than {limits.bytes:,} bytes of tools")
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise self._too_large("pages", f"more than {limits.pages} pages of tools")

    def _too_large(self, limit: str, what: str) -> McpListingTooLarge:
        return McpListingTooLarge(
            f"MCP server {self.name!r} ({self.command}) listed {what}; it was stopped. "
            "Check the server, or leave it out of mcp_servers",
            server=self.name,
            limit=limit,
        )

    def operation_name(self, tool: str) -> str:
        return f"mcp__{self.name}__{_safe(tool)}"[:64]

    def operations(self) -> list[Operation]:
        """The operations of the tools whose declarations were accepted at start."""
        return list(self._operations)

    def _build(
        self, tools: Sequence[mcp_types.Tool]
    ) -> tuple[tuple[Operation, ...], tuple[McpToolRefused, ...]]:
        ops: list[Operation] = []
        refused = [self.refusal(tool, problem) for tool, problem in self._screen.refused]
        names: set[str] = set()
        for tool in tools:
            name = self.operation_name(tool.name)
            problem = schema_problem(tool.input_schema)
            if problem is None and name.lower() in names:
                problem = f"its operation name {name} is already taken by another of its tools"
            operation = None
            if problem is None:
                try:
                    operation = self._operation(name, tool)
                except (OperationDeclarationError, TypeError, ValueError) as exc:
                    problem = f"it cannot be declared ({exc})"
            if operation is None:
                refused.append(self.refusal(tool.name, str(problem)))
                continue
            names.add(name.lower())
            ops.append(operation)
            self._tool_of[name] = tool.name
        return tuple(ops), tuple(refused)

    def tool_of(self, operation: str) -> str:
        """The server's name of the tool behind one of :meth:`operations`."""
        return self._tool_of[operation]

    def refusal(self, tool: str, problem: str) -> McpToolRefused:
        """The coded refusal of one of this server's tools."""
        return McpToolRefused(
            f"MCP server {self.name!r}: tool {tool[:100]!r} was not loaded: {problem}; "
            "its other tools were",
            server=self.name,
            tool=tool,
        )

    def _operation(self, name: str, tool: mcp_types.Tool) -> Operation:
        return Operation(
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

    def _handler(self, tool: str) -> Handler:
        def handler(args: BaseModel, ctx: CallContext) -> ToolOutput:
            arguments = args.model_dump(mode="json", exclude_unset=True)
            return self.call(tool, arguments, ctx.timeout, stop=ctx.stop)

        return handler

    def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float,
        *,
        stop: StopSignal | None = None,
    ) -> ToolOutput:
        """Call ``tool``; ``stop`` cancels the request (the server is told) and the result
        says it was interrupted."""
        if self._portal is None or self._client is None:
            raise ToolFailure(f"MCP server {self.name!r} is not running")
        client = self._client
        seen: dict[str, Any] = {"effects": "unknown", "server": self.name, "tool": tool}
        asked = functools.partial(client.call_tool, tool, arguments, read_timeout_seconds=timeout)
        start = time.monotonic()
        running = self._portal.start_task_soon(asked)
        try:
            result = _answer(running, stop)
        except concurrent.futures.CancelledError:
            assert stop is not None
            seconds = time.monotonic() - start
            seen |= {"interrupted": True, "interrupted_by": stop.by, "seconds": round(seconds, 3)}
            seen["reason"] = f"interrupted by {stop.by} while it ran; its effects are unknown"
            what = f"the request to MCP server {self.name!r} was cancelled (the server was told)"
            text = interrupted_note(stop, seconds, what)
            return ToolOutput(text, is_error=True, observations=seen, interrupted=True)
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


# How often a waiting call looks at a person's stop.
_LOOK_S = 0.05


def _answer(running: Future[mcp_types.CallToolResult], stop: StopSignal | None) -> Any:
    """The call's result; when ``stop`` is set first, its task is cancelled (the SDK sends
    the server ``notifications/cancelled``) and ``CancelledError`` is raised."""
    while True:
        try:
            return running.result(timeout=None if stop is None else _LOOK_S)
        except concurrent.futures.TimeoutError:
            assert stop is not None
            if stop.is_set() and running.cancel():
                raise concurrent.futures.CancelledError from None


def _reason(exc: BaseException) -> str:
    """The error inside the SDK's task groups, which wrap what the server did."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{exc}" or type(exc).__name__


def _stop_serving(portal: BlockingPortal, served: Future[None], stop: anyio.Event) -> None:
    """Tell the client's task to leave the client (which stops the server) and wait for it."""
    portal.call(stop.set)
    try:
        served.result()
    except Exception:  # a server that died mid-session must not fail the close
        pass
