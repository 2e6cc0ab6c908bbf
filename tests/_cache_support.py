"""Shared helpers for the prompt-cache tests: runtimes over the fake server, event reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from comal.agent import Config, Flags, Runtime
from comal.ledger import LedgerBackend, Scope
from comal.providers import AnthropicProvider, Provider, RetryPolicy
from comal.testing import FakeServer

MODEL = "claude-sonnet-4-6"


def day(n: int, hour: int = 9) -> datetime:
    return datetime(2026, 1, n, hour, 0, tzinfo=UTC)


def frozen(when: datetime) -> Callable[[], datetime]:
    return lambda: when


def claude(server: FakeServer) -> AnthropicProvider:
    return AnthropicProvider(
        api_key="k", base_url=server.anthropic_base_url, retry=RetryPolicy(attempts=1)
    )


def runtime(
    led: LedgerBackend,
    ws: Path,
    provider: Provider,
    *,
    resume: str | None = None,
    clock: Callable[[], datetime] | None = None,
    config: Config | None = None,
    context_window: int | None = None,
) -> Runtime:
    flags = Flags(
        model=f"anthropic:{MODEL}", workspace=ws, mode="trusted", context_window=context_window
    )
    return Runtime.open(
        led, flags, resume=resume, config=config or Config(), provider=provider, clock=clock
    )


def events(led: LedgerBackend, scope: Scope, *kinds: str) -> list[dict[str, Any]]:
    return [r.body | {"kind": r.kind} for r in led.records(scope, "event", kinds=kinds)]


def unmarked(value: Any) -> Any:
    """``value`` without cache_control markers (their TTL is CCH-4's, not the content's)."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def exact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def bash(call_id: str, command: str) -> dict[str, Any]:
    return {
        "content": [
            {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}
        ]
    }


def answer(text: str, **usage: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if usage:
        entry["usage"] = usage
    return entry
