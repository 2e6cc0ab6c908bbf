"""Shared helpers for the house's tests: a ledger session, a workspace and a house over them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comal.ledger import Scope, SQLiteLedger, open_ledger
from comal.messages import Message, ToolCall
from comal.ops import (
    Actor,
    Approver,
    House,
    Outcome,
    Policy,
    Probe,
    Receipt,
    Registry,
    Workspace,
    default_registry,
    unguarded,
)
from comal.tokens import EstimatingCounter

ANA = Actor.user("ana")


@dataclass
class Setup:
    ledger: SQLiteLedger
    scope: Scope
    root: Path
    house: House

    def close(self) -> None:
        self.ledger.close()


def make_setup(
    tmp_path: Path,
    *,
    policy: Policy | None = None,
    approver: Approver | None = None,
    registry: Registry | None = None,
    probe: Probe | None = None,
    session: str | None = None,
    ledger_path: Path | None = None,
    tenant: str = "t",
    **house_kw: Any,
) -> Setup:
    """``house_kw`` goes on to :class:`House` (``bwrap``, ``protected_paths``)."""
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    path = ledger_path if ledger_path is not None else tmp_path / "ledger.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    led = open_ledger(path, counter=EstimatingCounter())
    scope = led.create_session(tenant, "a", session_id=session)
    house = House(
        led,
        scope,
        registry if registry is not None else default_registry(),
        policy if policy is not None else Policy(mode="trusted"),
        workspace=Workspace(root),
        approver=approver,
        probe=probe,
        **({"guard": unguarded} | house_kw),  # the test is the session's only writer
    )
    return Setup(led, scope, root, house)


_counter = 0


def call(name: str, args: dict[str, Any] | str, call_id: str | None = None) -> ToolCall:
    global _counter
    _counter += 1
    text = args if isinstance(args, str) else json.dumps(args)
    return ToolCall(call_id or f"call-{_counter}", name, text)


def propose(
    s: Setup, tool_call: ToolCall, actor: Actor = ANA, **kw: Any
) -> tuple[Outcome, Receipt]:
    """The model's path: the assistant message is appended, then the house handles the call."""
    step = s.ledger.append(s.scope, [Message.assistant("", tool_call)])[0].step
    return s.house.handle(tool_call, actor, join_step=step, **kw)


def on_cli(s: Setup, tool_call: ToolCall, actor: Actor = ANA) -> tuple[Outcome, Receipt]:
    return s.house.handle(tool_call, actor, surface="cli")
