"""Lifecycle hooks: a plugin sees, and may steer, what happens in a session.

Eight events, named as Claude Code names them (so its users' hooks map one to one), each a
pluggy hook specification taking one :class:`HookEvent` and returning a :class:`HookResult`
(or ``None``: nothing to say)::

    from comal.plugins import HookEvent, HookResult, hookimpl

    @hookimpl
    def comal_pre_tool_use(event: HookEvent) -> HookResult | None:
        if event.data["tool_name"] == "Bash" and "rm -rf" in event.data["tool_input"]["command"]:
            return HookResult.deny("no rm -rf here")
        return None

- ``SessionStart``: a session starts or resumes (``data.source``: ``startup``/``resume``);
  may add context.
- ``UserPromptSubmit``: a person's prompt, before the turn it starts is sent; may add context
  or ``block`` it.
- ``PreToolUse``: a tool call, after the house judged it and before anyone is asked; may
  ``deny`` or ``ask``.
- ``PostToolUse``: a tool call ran (its result in ``data.tool_response``); ``block`` sends its
  reason to the model; may add context.
- ``Stop``: the model ended its turn with no tool call; ``block`` makes the agent go on, told
  the reason (a bounded number of times).
- ``SubagentStop``: as ``Stop``, for a work step's agent.
- ``PreCompact`` (``data.trigger``: ``auto``/``manual``) and ``PostCompact`` (``data.made``):
  around a compaction; they are told, nothing more.

**A hook never widens.** ``PreToolUse`` runs on what the house allowed or would ask about: a
``deny`` refuses the call, an ``ask`` turns an allowed call into one a person approves, and an
``allow`` is no objection — what the house denies stays denied, and what it asks about is still
asked. Every implementation of an event is called (pluggy, the ``comal`` project's manager) and
answers with a result, a list of them, or ``None``; the results are merged by :func:`dispatch`:
one ``deny`` (or ``block``) decides, reasons and contexts are joined, each tagged with the
plugin that said it. A hook that raises is recorded as a failure and counts as no objection, as
Claude Code treats a hook that fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

import pluggy

from ._specs import hookspec

__all__ = [
    "EVENTS",
    "HookEvent",
    "HookOutcome",
    "HookResult",
    "LifecycleEvent",
    "dispatch",
    "merged_reasons",
]

LifecycleEvent = Literal[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
]
HookDecision = Literal["deny", "ask", "block"]

# Each event's hook specification, by the event's name.
EVENTS: Final[Mapping[str, str]] = {
    "SessionStart": "comal_session_start",
    "UserPromptSubmit": "comal_user_prompt_submit",
    "PreToolUse": "comal_pre_tool_use",
    "PostToolUse": "comal_post_tool_use",
    "Stop": "comal_stop",
    "SubagentStop": "comal_subagent_stop",
    "PreCompact": "comal_pre_compact",
    "PostCompact": "comal_post_compact",
}
# The decisions each event takes; any other is ignored (and said so in the outcome).
_DECISIONS: Final[Mapping[str, frozenset[str]]] = {
    "UserPromptSubmit": frozenset({"block"}),
    "PreToolUse": frozenset({"deny", "ask"}),
    "PostToolUse": frozenset({"block"}),
    "Stop": frozenset({"block"}),
    "SubagentStop": frozenset({"block"}),
}


@dataclass(frozen=True, slots=True)
class HookEvent:
    """What a lifecycle hook is told. ``data`` holds the event's own fields, in Claude Code's
    names: ``prompt``; ``tool_name``, ``tool_input``, ``tool_use_id``, ``tool_response``;
    ``stop_hook_active``; ``trigger``, ``custom_instructions``; ``source``."""

    name: LifecycleEvent
    tenant: str
    agent: str
    session: str
    surface: str = "model"
    cwd: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    # What the surface that dispatches the event lends the hooks that act for it: the
    # session's house (its workspace, sandbox and the operator's command hooks), or None
    # where there is none (the proxy, a replay). Never part of what a hook is told.
    host: Any = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The event in Claude Code's names, as its hooks read it on stdin: ``session_id``,
        ``cwd``, ``hook_event_name`` and the event's own fields (``data``)."""
        return {
            "session_id": self.session,
            "cwd": self.cwd,
            "hook_event_name": self.name,
            **self.data,
        }


@dataclass(frozen=True, slots=True)
class HookResult:
    """One hook's answer: a ``decision`` (``deny``/``ask`` before a tool call, ``block`` where
    the event takes one) with its ``reason``, ``context`` for the model, and ``stop``: end the
    agent's run (Claude Code's ``continue: false``), saying ``reason``. ``by`` names who said
    it (filled by :func:`dispatch`). ``record`` is what the hook did, kept with the outcome in
    the ledger (a command hook's run: the command, its exit code, time and output cut short)."""

    decision: HookDecision | None = None
    reason: str = ""
    context: str = ""
    stop: bool = False
    by: str = ""
    record: Mapping[str, Any] | None = None

    @classmethod
    def deny(cls, reason: str) -> HookResult:
        return cls("deny", reason)

    @classmethod
    def ask(cls, reason: str) -> HookResult:
        return cls("ask", reason)

    @classmethod
    def block(cls, reason: str) -> HookResult:
        return cls("block", reason)

    @classmethod
    def add_context(cls, text: str) -> HookResult:
        return cls(context=text)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "decision": self.decision,
            "reason": self.reason,
            "context": self.context,
            "stop": self.stop,
            "by": self.by,
        }
        if self.record is not None:
            out["record"] = dict(self.record)
        return out


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """Every hook's answer to one event, merged: the deciding result (the first ``deny`` or
    ``block``, else the first ``ask``), the contexts in order, whether one asked to stop, and
    the hooks that failed (``(by, error)``)."""

    event: HookEvent
    results: tuple[HookResult, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()

    @property
    def decision(self) -> HookResult | None:
        for wanted in ("deny", "block", "ask"):
            for r in self.results:
                if r.decision == wanted:
                    return r
        return None

    @property
    def context(self) -> str:
        return "\n".join(f"[{r.by}] {r.context}" for r in self.results if r.context)

    @property
    def stopped(self) -> HookResult | None:
        return next((r for r in self.results if r.stop), None)

    def __bool__(self) -> bool:
        return bool(self.results or self.failures)

    def as_dict(self) -> dict[str, Any]:
        """The record of this dispatch (a ledger event's body)."""
        return {
            "v": 1,
            "event": self.event.name,
            "results": [r.as_dict() for r in self.results],
            "failures": [{"by": b, "error": e} for b, e in self.failures],
        }


# -- the specifications (added to the manager beside the registration hooks) ------------------


@hookspec
def comal_session_start(event: HookEvent) -> HookResult | None:
    """A session starts (``data.source`` ``startup``) or resumes (``resume``)."""


@hookspec
def comal_user_prompt_submit(event: HookEvent) -> HookResult | None:
    """A person's prompt (``data.prompt``), before the turn it starts is sent."""


@hookspec
def comal_pre_tool_use(event: HookEvent) -> HookResult | None:
    """A tool call the house allowed or would ask about (``data.tool_name``,
    ``data.tool_input``, ``data.tool_use_id``): ``deny`` or ``ask`` (never widens)."""


@hookspec
def comal_post_tool_use(event: HookEvent) -> HookResult | None:
    """A tool call ran (``data.tool_response``: its text, ``is_error`` and status)."""


@hookspec
def comal_stop(event: HookEvent) -> HookResult | None:
    """The model ended its turn with no tool call; ``block`` makes the agent go on."""


@hookspec
def comal_subagent_stop(event: HookEvent) -> HookResult | None:
    """A work step's agent ended its turn; ``block`` makes it go on."""


@hookspec
def comal_pre_compact(event: HookEvent) -> HookResult | None:
    """A compaction is about to run (``data.trigger``: ``auto`` or ``manual``)."""


@hookspec
def comal_post_compact(event: HookEvent) -> HookResult | None:
    """A compaction ran (``data.made``: the stand-ins it stored)."""


def _name_of(pm: pluggy.PluginManager, impl: Any) -> str:
    return pm.get_name(impl.plugin) or type(impl.plugin).__name__


def dispatch(pm: pluggy.PluginManager, event: HookEvent) -> HookOutcome:
    """Every implementation of ``event``'s hook, through pluggy, merged (module docstring).

    Each plugin is called through a subset of the manager's hook caller holding it alone
    (``pm.subset_hook_caller``), so one that raises is recorded and the others still answer."""
    hook = EVENTS[event.name]
    caller = getattr(pm.hook, hook)
    impls = caller.get_hookimpls()
    if not impls:
        return HookOutcome(event)
    allowed = _DECISIONS.get(event.name, frozenset())
    results: list[HookResult] = []
    failures: list[tuple[str, str]] = []
    plugins = [impl.plugin for impl in impls]
    for impl in impls:
        by = _name_of(pm, impl)
        alone = pm.subset_hook_caller(hook, [p for p in plugins if p is not impl.plugin])
        try:
            answers = alone(event=event)
        except Exception as exc:  # a plugin's own code: recorded, never a traceback
            failures.append((by, f"{type(exc).__name__}: {exc}"))
            continue
        for answer in _flat(answers):
            if not isinstance(answer, HookResult):
                failures.append((by, f"returned {type(answer).__name__}, not a HookResult"))
                continue
            decision = answer.decision if answer.decision in allowed else None
            if answer.decision is not None and decision is None:
                failures.append((by, f"{event.name} takes no decision {answer.decision!r}"))
            results.append(replace(answer, decision=decision, by=answer.by or by))
    return HookOutcome(event, tuple(results), tuple(failures))


def _flat(answers: Sequence[Any]) -> list[Any]:
    """Each implementation's answer: one result, or a list of them (a plugin that runs several
    commands for one event answers once for each)."""
    out: list[Any] = []
    for answer in answers:
        out += answer if isinstance(answer, list | tuple) else [answer]
    return out


def merged_reasons(results: Sequence[HookResult], decision: str) -> str:
    """The reasons of every result with ``decision``, each tagged with who gave it."""
    return "; ".join(f"{r.by}: {r.reason}" for r in results if r.decision == decision)
