"""``comal serve`` settings: where the ledger is, which engine, which upstreams, which limits."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agent import Config

__all__ = ["DEFAULT_ANTHROPIC", "DEFAULT_OPENAI", "ServeConfig", "is_loopback"]

DEFAULT_ANTHROPIC = "https://api.anthropic.com"
DEFAULT_OPENAI = "https://api.openai.com/v1"


def _loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_loopback(host: str) -> bool:
    """Whether a server bound to ``host`` is reachable from this machine only.

    Only an explicit loopback address counts, or ``localhost`` when every address it resolves
    to is one: ``""`` and ``0.0.0.0`` listen on every interface.
    """
    if _loopback_address(host):
        return True
    if host.lower() != "localhost":
        return False
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return bool(found) and all(_loopback_address(str(info[4][0])) for info in found)


@dataclass(frozen=True)
class ServeConfig:
    """Operator settings (CFG-2: nothing a client sends changes them).

    ``upstream_*_key``: when set, the proxy sends this key upstream instead of the client's own
    key headers (which are otherwise passed through unchanged). ``output_reserve``: output
    tokens the input is budgeted against (``None``: the budget's default, at most 16k and an
    eighth of the window). ``max_recalls``: EvidenceRead rounds the proxy runs for one client
    request before it returns the reply as it is. ``operator``: the loaded configuration file
    (rules, limits, sandbox, the engine's settings): the recall calls the proxy runs are judged
    under its policy, as the agent's calls are (``None``: the defaults).

    ``allowed_hosts`` / ``allowed_origins``: names a request's ``Host`` may carry and browser
    origins that may call, besides the server's own (:mod:`._guard`). ``header_timeout``,
    ``body_timeout``, ``keep_alive_timeout`` (seconds) and ``max_connections`` bound what a
    slow or idle client can hold (:mod:`._limits`).
    """

    ledger: Path | str | None = None
    host: str = "127.0.0.1"
    port: int = 8787
    engine: str = "limit"
    context_window: int | None = None
    upstream_anthropic: str = DEFAULT_ANTHROPIC
    upstream_openai: str = DEFAULT_OPENAI
    upstream_anthropic_key: str | None = None
    upstream_openai_key: str | None = None
    output_reserve: int | None = None
    max_body_bytes: int = 32 << 20
    upstream_timeout: float = 600.0
    max_recalls: int = 4
    dashboard: bool = True
    local_tenant: str = "local"
    extra_headers: dict[str, str] = field(default_factory=dict)
    operator: Config | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    header_timeout: float = 10.0
    body_timeout: float = 120.0
    keep_alive_timeout: int = 5
    max_connections: int = 1_000

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)
