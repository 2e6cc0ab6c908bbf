"""The MCP servers an operator configures (``mcp_servers``), started by the runtime that runs the
agent: once per process, inside the house's OS sandbox, their tools added to the one registry so
every surface judges, receipts and shows them like native operations; closed with the runtime.

A server that cannot start is a coded error before the run, never a tool that quietly is not
there. What the sandbox allows each server (network, memory cap, seccomp) is recorded as an
``mcp_started`` event, and a server that has the network or runs unsandboxed is said at start.
Each server's stderr goes to its own log file (a TUI owns the terminal), named in errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from platformdirs import user_log_dir

from ..ops import McpServerConfig, McpServerError, Registry, Sandbox

if TYPE_CHECKING:
    from ..ops import McpServer

__all__ = ["MCP_EVENT", "McpServers"]

MCP_EVENT = "mcp_started"


def mcp_log_dir() -> Path:
    return Path(user_log_dir("comal", appauthor=False)) / "mcp"


class McpServers:
    """The configured servers of one runtime; :meth:`start` is idempotent."""

    def __init__(self, configs: Mapping[str, McpServerConfig], log_dir: Path | None = None):
        self.configs = dict(configs)
        self.log_dir = log_dir if log_dir is not None else mcp_log_dir()
        self.running: list[McpServer] = []
        self._stack: ExitStack | None = None

    def start(self, registry: Registry, sandbox: Sandbox | None) -> list[dict[str, Any]]:
        """Start every server not yet running, add its tools to ``registry``; what each one was
        given (for the ``mcp_started`` event and the operator's notices). Nothing to do, or
        already started: an empty list."""
        if self._stack is not None or not self.configs:
            return []
        from ..ops import McpServer  # the MCP SDK loads only when a server is configured

        stack = ExitStack()
        started: list[dict[str, Any]] = []
        operations = []
        try:
            for name, cfg in self.configs.items():
                log = self._log(stack, name)
                server = McpServer.configured(name, cfg, sandbox=sandbox, errlog=log)
                try:
                    stack.enter_context(server)
                except McpServerError as exc:
                    raise McpServerError(f"{exc}; its log is {log.name}") from exc
                operations += server.operations()
                self.running.append(server)
                started.append(
                    {
                        "server": name,
                        "tools": [t.name for t in server.tools],
                        "sandbox": server.sandbox_info(),
                        "notice": server.notice(),
                        "log": log.name,
                    }
                )
            # All or nothing: a server that fails leaves no other's tools in the registry.
            registry.add_all(operations)
        except BaseException:
            stack.close()
            self.running.clear()
            raise
        self._stack = stack
        return started

    def _log(self, stack: ExitStack, name: str) -> TextIO:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return stack.enter_context((self.log_dir / f"{name}.log").open("a", encoding="utf-8"))

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = None
        self.running.clear()
