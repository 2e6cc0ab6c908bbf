"""The MCP servers an operator configures (``mcp_servers``), started by the runtime that runs the
agent: once per process, inside the house's OS sandbox, their tools added to the one registry so
every surface judges, receipts and shows them like native operations; closed with the runtime.

Each server's start is recorded as an ``mcp_started`` event: what the sandbox allows it
(network, memory cap, seccomp), the tools it brought, the tools refused (each with its code and
why) and, for a server that could not start (it failed, hung past its start_timeout, or listed
more than anyone should offer a model), the coded error. The agent goes on without a server
that did not start, and without a refused tool, and the operator is told at start, as for a
server that has the network or runs unsandboxed. Each server's stderr goes to its own log file
(a TUI owns the terminal), named in the event.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from platformdirs import user_log_dir

from ..ops import McpServerConfig, McpServerError, Operation, Registry, Sandbox

if TYPE_CHECKING:
    from ..ops import McpServer

__all__ = ["MCP_EVENT", "McpServers"]

MCP_EVENT = "mcp_started"


def mcp_log_dir() -> Path:
    return Path(user_log_dir("comal", appauthor=False)) / "mcp"


def _coded(exc: McpServerError) -> dict[str, str]:
    return {"code": exc.code, "message": str(exc)}


class McpServers:
    """The configured servers of one runtime; :meth:`start` is idempotent."""

    def __init__(self, configs: Mapping[str, McpServerConfig], log_dir: Path | None = None):
        self.configs = dict(configs)
        self.log_dir = log_dir if log_dir is not None else mcp_log_dir()
        self.running: list[McpServer] = []
        self._stack: ExitStack | None = None

    def start(self, registry: Registry, sandbox: Sandbox | None) -> list[dict[str, Any]]:
        """Start every server not yet running, add the tools of those that started to
        ``registry``; what each one was given or why it was not (for the ``mcp_started``
        event and the operator's notices). Nothing to do, or already started: an empty list."""
        if self._stack is not None or not self.configs:
            return []
        stack = ExitStack()
        started: list[dict[str, Any]] = []
        operations: list[Operation] = []
        try:
            for name, cfg in self.configs.items():
                started.append(self._start(stack, name, cfg, sandbox, registry, operations))
            # Together or not at all: an interrupted start leaves no tool of a stopped server.
            registry.add_all(operations)
        except BaseException:
            stack.close()
            self.running.clear()
            raise
        self._stack = stack
        return started

    def _start(
        self,
        stack: ExitStack,
        name: str,
        cfg: McpServerConfig,
        sandbox: Sandbox | None,
        registry: Registry,
        operations: list[Operation],
    ) -> dict[str, Any]:
        from ..ops import McpServer  # the MCP SDK loads only when a server is configured

        log = self._log(stack, name)
        server = McpServer.configured(name, cfg, sandbox=sandbox, errlog=log)
        given: dict[str, Any] = {"server": name, "sandbox": server.sandbox_info(), "log": log.name}
        notices = [server.notice()]
        try:
            stack.enter_context(server)
        except McpServerError as exc:
            notices.append(f"comal: {exc}; the agent goes on without it (its log is {log.name})")
            return given | {
                "tools": [],
                "refused": [],
                "error": _coded(exc),
                "notice": _say(notices),
            }
        # Operation names are compared as slash commands are, without case.
        taken = {o.name.lower() for o in (*registry, *operations)}
        tools, refused = [], list(server.refused)
        for op in server.operations():
            if op.name.lower() in taken:
                why = f"its operation name {op.name} is taken by another server's tool"
                refused.append(server.refusal(server.tool_of(op.name), why))
                continue
            operations.append(op)
            tools.append(server.tool_of(op.name))
        notices += [f"comal: {r}" for r in refused]
        self.running.append(server)
        return given | {
            "tools": tools,
            "refused": [{"tool": r.tool} | _coded(r) for r in refused],
            "notice": _say(notices),
        }

    def _log(self, stack: ExitStack, name: str) -> TextIO:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return stack.enter_context((self.log_dir / f"{name}.log").open("a", encoding="utf-8"))

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = None
        self.running.clear()


def _say(notices: list[str | None]) -> str | None:
    return "\n".join(n for n in notices if n) or None
