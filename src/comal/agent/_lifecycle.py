"""The agent's lifecycle hooks: ``SessionStart``, ``UserPromptSubmit``, ``Stop`` and
``SubagentStop`` (:mod:`comal.plugins._lifecycle`; the house dispatches ``PreToolUse`` and
``PostToolUse``, the turn service ``PreCompact`` and ``PostCompact``).

What a hook adds for the model is appended to the session as a message of its own (a user
message named ``hook``), so the ledger keeps it and every engine sends it like any other; every
dispatch a hook answered is recorded as a ``hook`` event. A ``Stop`` hook that blocks makes the
agent go on, told why, at most :data:`MAX_CONTINUES` times a run: past that the run stops as
it would have, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..errors import UserError
from ..ledger import LedgerBackend, Scope
from ..messages import Message, Role, Text
from ._result import answer_of

if TYPE_CHECKING:
    from ..plugins import HookOutcome, LifecycleEvent

__all__ = ["HOOK_EVENT", "MAX_CONTINUES", "AgentHooks", "PromptBlocked"]

HOOK_EVENT: Final = "hook"
MAX_CONTINUES: Final = 5


class PromptBlocked(UserError):
    """A ``UserPromptSubmit`` hook refused the prompt; nothing was sent."""

    code = "PROMPT_BLOCKED"


def hook_message(event: str, text: str) -> Message:
    return Message(Role.USER, (Text(f"[{event} hook]\n{text}"),), name="hook")


class AgentHooks:
    """One agent's dispatches (see the module docstring)."""

    def __init__(
        self,
        ledger: LedgerBackend,
        scope: Scope,
        *,
        cwd: str | None,
        subagent: bool,
        say: Callable[[str, str], None],
        host: object = None,
    ) -> None:
        self.ledger = ledger
        self.scope = scope
        self.cwd = cwd
        self.subagent = subagent
        self.say = say
        # The agent's house, lent to the hooks that act for it (HookEvent.host).
        self.host = host
        self.continues = 0
        # A hook's ``continue: false`` (``HookResult.stop``): the run ends, saying why.
        self.halt: str | None = None

    def _dispatch(self, name: LifecycleEvent, data: Mapping[str, Any]) -> HookOutcome:
        from ..plugins import HookEvent, lifecycle  # loaded by the first dispatch, not import

        s = self.scope
        if self.subagent:
            # As Claude Code tells a hook that fires inside a subagent which one it is.
            data = {**data, "agent_id": s.session, "agent_type": s.agent}
        event = HookEvent(name, s.tenant, s.agent, s.session, "model", self.cwd, data, self.host)
        outcome = lifecycle(event)
        if outcome:
            self.ledger.add_record(self.scope, "event", HOOK_EVENT, outcome.as_dict())
            for by, error in outcome.failures:
                self.say("warn", f"{name} hook {by} failed: {error}")
        stopped = outcome.stopped
        if stopped is not None:
            self._halt(f"the {name} hook {stopped.by}", stopped.reason)
        return outcome

    def _halt(self, who: str, reason: str) -> None:
        if self.halt is None:
            self.halt = f"{who} stopped the run: {reason}"

    def after_call(self, name: str, *seen: Mapping[str, Any] | None) -> None:
        """Tool call ``name``'s ``PreToolUse`` and ``PostToolUse`` answers, as its judgment
        and receipt keep them: one that said stop (``continue: false``) ends the run."""
        for kept in seen:
            for said in (kept or {}).get("results", ()):
                if said.get("stop"):
                    self._halt(
                        f"a hook {said.get('by')} on the {name} call", said.get("reason", "")
                    )

    def _context(self, name: str, outcome: HookOutcome) -> list[Message]:
        return [hook_message(name, outcome.context)] if outcome.context else []

    def session_start(self, source: str) -> None:
        """A run of this session begins (``startup``: it is new; ``resume``)."""
        outcome = self._dispatch("SessionStart", {"source": source})
        added = self._context("SessionStart", outcome)
        if added:
            self.ledger.append(self.scope, added)

    def prompt(self, prompt: str) -> list[Message]:
        """A person's prompt, before it is stored: the hook context to store after it, or
        :class:`PromptBlocked`."""
        outcome = self._dispatch("UserPromptSubmit", {"prompt": prompt})
        said = outcome.decision
        if said is not None and said.decision == "block":
            raise PromptBlocked(
                f"the prompt was refused by the UserPromptSubmit hook {said.by}: {said.reason}; "
                "nothing was sent to the model"
            )
        return self._context("UserPromptSubmit", outcome)

    def stop(self) -> bool:
        """The model ended its turn with no tool call: ``True`` when a hook blocked it and a
        message telling why was appended (the agent goes on), within the bound."""
        name: LifecycleEvent = "SubagentStop" if self.subagent else "Stop"
        data = {
            "stop_hook_active": self.continues > 0,
            "last_assistant_message": answer_of(self.ledger, self.scope),
        }
        outcome = self._dispatch(name, data)
        said = outcome.decision
        if said is None or said.decision != "block":
            return False
        if self.continues >= MAX_CONTINUES:
            self.say(
                "warn",
                f"{name} hook {said.by} asked to go on {self.continues + 1} times this run; "
                f"the bound is {MAX_CONTINUES}: stopping",
            )
            return False
        self.continues += 1
        text = f"{said.by}: {said.reason}" if said.reason else said.by
        self.ledger.append(self.scope, [hook_message(name, text)])
        self.say("note", f"{name} hook {said.by}: going on ({said.reason})")
        return True
