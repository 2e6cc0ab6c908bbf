"""Approvers: where an "ask" judgment goes. The approval is recorded with the human who gave it.

An approver answers one request, for one call with one argument digest; nothing it returns
authorises any other call (OPS-7). A house without an approver is headless: "ask" becomes
"deny", and the denial says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..safe_text import safe_command
from ._model import Actor, Effect, Surface, now

__all__ = [
    "Approval",
    "ApprovalRequest",
    "Approver",
    "CallbackApprover",
    "PromptApprover",
]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    call_id: str
    operation: str
    actor: Actor
    surface: Surface
    arguments: Mapping[str, Any]
    arguments_digest: str
    rule: str
    reason: str
    effects: tuple[Effect, ...]
    # What a Write or Edit would change, as a unified diff against the file now (or why the
    # call would fail); None for other operations.
    change: str | None = None

    def describe(self) -> str:
        args = json.dumps(dict(self.arguments), ensure_ascii=False, sort_keys=True)
        kinds = ", ".join(e.kind for e in self.effects)
        return (
            f"{self.actor.kind} {self.actor.id} proposes {self.operation} {args}\n"
            f"effects: {kinds}; asked by rule {self.rule}"
            + (f" ({self.reason})" if self.reason else "")
        )


@dataclass(frozen=True, slots=True)
class Approval:
    """A human's answer. ``by`` must be a user or an operator: a model or a sub-agent cannot
    approve anything."""

    granted: bool
    by: Actor
    reason: str = ""
    at: str = field(default_factory=now)

    def __post_init__(self) -> None:
        if not self.by.human:
            raise ValueError(f"only a user or operator can approve, not a {self.by.kind}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "granted": self.granted,
            "by": self.by.as_dict(),
            "reason": self.reason,
            "at": self.at,
        }


class Approver(Protocol):
    def approve(self, request: ApprovalRequest) -> Approval: ...


class CallbackApprover:
    """Approves with a function ``request -> bool`` on behalf of the human ``by``."""

    def __init__(self, decide: Callable[[ApprovalRequest], bool], by: Actor) -> None:
        Approval(False, by)  # refuse a non-human approver at construction, not at first use
        self._decide = decide
        self.by = by

    def approve(self, request: ApprovalRequest) -> Approval:
        granted = bool(self._decide(request))
        return Approval(granted, self.by, "approved" if granted else "refused")


class PromptApprover:
    """Asks on a terminal: shows the request and reads ``y``/``n`` (anything else is no)."""

    def __init__(
        self,
        by: Actor,
        *,
        ask: Callable[[str], str] = input,
        say: Callable[[str], None] = print,
    ) -> None:
        Approval(False, by)
        self.by = by
        self._ask = ask
        self._say = say

    def approve(self, request: ApprovalRequest) -> Approval:
        # Exactly what will run, with anything a terminal would act on or hide shown escaped.
        self._say(safe_command(request.describe()))
        if request.change is not None:
            self._say(safe_command(request.change))
        try:
            answer = self._ask("allow this call? [y/N] ").strip().lower()
        except EOFError:
            answer = ""
        granted = answer in ("y", "yes")
        return Approval(granted, self.by, f"answered {answer!r} at the prompt")
