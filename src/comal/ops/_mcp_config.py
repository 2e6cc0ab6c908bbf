"""What the operator configures for one MCP server, validated without loading the MCP SDK
(the agent's configuration holds these; :mod:`._mcp` starts them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._model import EffectKind

__all__ = ["SERVER_NAME", "McpLimits", "McpServerConfig"]

# A server's name becomes part of its operations' names (mcp__<server>__<tool>, at most 64).
SERVER_NAME = r"[A-Za-z0-9_-]{1,24}"


@dataclass(frozen=True, slots=True)
class McpLimits:
    """Bounds on an MCP server's start: seconds for the handshake and, again, for listing its
    tools; at most ``pages`` pages of ``tools`` tools in ``bytes`` bytes of JSON. A server
    that never answers, pages forever or sends a catalog no model could be offered is stopped
    with a coded error rather than holding the start."""

    handshake_s: float = 30.0
    listing_s: float = 30.0
    pages: int = 100
    tools: int = 500
    bytes: int = 4_000_000


class McpServerConfig(BaseModel):
    """One MCP server in the operator's configuration. ``network`` is off unless the server
    says it needs it; ``env`` is all the environment it gets besides ``HOME``, ``LOGNAME``,
    ``PATH``, ``SHELL``, ``TERM`` and ``USER``; ``readable_paths`` are paths the sandbox's
    private ``/tmp`` and empty ``/run`` would hide that the server must read (its own
    installation, say); ``effects`` names the effect kinds of tools, by tool name;
    ``start_timeout`` is the seconds it has to answer its handshake, and again to list its
    tools (a server fetched on first use may need more than the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    command: str = Field(min_length=1, max_length=4_096)
    args: list[Annotated[str, Field(max_length=100_000)]] = Field(
        default_factory=list, max_length=1_000
    )
    env: dict[str, str] = Field(default_factory=dict, max_length=1_000)
    cwd: str | None = Field(default=None, min_length=1)
    network: bool = False
    readable_paths: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, max_length=100
    )
    effects: dict[str, list[EffectKind]] = Field(default_factory=dict)
    start_timeout: float = Field(default=30.0, gt=0, le=600)

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [k for k in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) or "\0" in env[k]]
        if bad:
            raise ValueError(f"environment names must be shell identifiers: {bad[0]!r}")
        return env
