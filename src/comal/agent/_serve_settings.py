"""``serve``: the configuration file's section for ``comal serve`` (operator-only, CFG-2).

Who may reach the server besides its own names (the DNS-rebinding and cross-origin guards'
allow-lists), how long a client may take over a request, and where the web interface may run
agents: the workspaces it may start sessions in, the models it may use (none listed: the
web interface starts no session) and the permission modes its sessions may take (none listed:
the configured mode and the stricter ones: a page never widens the operator's mode). The
command line's ``--allow-host`` / ``--allow-origin`` add to the lists; nothing a client sends
changes them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from ..ops import MODES, Mode

__all__ = ["ServeSettings"]

HostName = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9_.:*\[\]-]+$")]
Origin = Annotated[str, Field(min_length=1, max_length=300, pattern=r"^https?://[^/\s]+$")]


class ServeSettings(BaseModel):
    """Settings of ``comal serve`` (the proxy, the HTTP API and the dashboard)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def web_modes(self, configured: Mode) -> tuple[Mode, ...]:
        """The modes a web session may take, strictest first: :attr:`modes`, or the
        configured mode and the stricter ones."""
        if self.modes is None:
            return MODES[: MODES.index(configured) + 1]
        return tuple(m for m in MODES if m in self.modes)

    def web_mode(self, configured: Mode) -> Mode:
        """The mode a web session starts in when the page names none: the configured one if
        it is allowed, else the widest allowed one stricter than it, else the strictest."""
        allowed = self.web_modes(configured)
        stricter = [m for m in allowed if MODES.index(m) <= MODES.index(configured)]
        return stricter[-1] if stricter else allowed[0]

    allowed_hosts: list[HostName] = Field(
        default_factory=list,
        max_length=100,
        description="Host names a request may name besides localhost, 127.0.0.1, ::1, the "
        "listening address and this machine's name, e.g. comal.internal or *.corp.example; "
        '"*" answers any name (DNS rebinding then reaches the server).',
    )
    allowed_origins: list[Origin] = Field(
        default_factory=list,
        max_length=100,
        description="Browser origins (scheme://host[:port]) whose pages may call the server "
        "besides its own dashboard, e.g. https://ops.example.",
    )
    workspaces: list[Annotated[str, Field(min_length=1, max_length=4_096)]] = Field(
        default_factory=list,
        max_length=100,
        description="Directories (absolute) the web interface may start agent sessions in, "
        "each with everything under it; none: the web interface starts no session.",
    )
    models: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        default_factory=list,
        max_length=100,
        description="Model specs (provider:model) the web interface may start a session with "
        "or switch to, besides the configuration's model.",
    )
    modes: list[Mode] | None = Field(
        default=None,
        min_length=1,
        max_length=3,
        description="Permission modes a web session may start in or switch to with /mode "
        "(read-only, ask, trusted); none: the configuration's mode and the stricter ones. A "
        "page asking for another is refused (MODE_NOT_ALLOWED).",
    )
    header_timeout: float = Field(
        default=10.0,
        ge=0.5,
        le=600.0,
        description="Seconds a client has to send a request's headers, from the moment it "
        "connects or sends the first byte of its next request.",
    )
    body_timeout: float = Field(
        default=120.0,
        ge=0.5,
        le=3_600.0,
        description="Seconds a client has to send a request's whole body once its headers are in.",
    )
    keep_alive_timeout: int = Field(
        default=5,
        ge=1,
        le=600,
        description="Seconds an idle kept-alive connection stays open between requests.",
    )
    max_connections: int = Field(
        default=1_000,
        ge=2,
        le=100_000,
        description="Open connections at once; beyond it new connections are closed and "
        "requests answered 503.",
    )
