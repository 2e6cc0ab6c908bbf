"""The house's two lifecycle hooks: ``PreToolUse`` before anyone is asked, ``PostToolUse``
after a call ran (:mod:`comal.plugins._lifecycle`).

``PreToolUse`` only tightens: the house's ``deny`` is final and never reaches a hook; an
``allow`` becomes ``ask`` or ``deny`` when a hook says so, an ``ask`` becomes ``deny``. The
decision names the hook (rule ``hook:<plugin>``) and its reason, and the receipt keeps it;
what the hooks add for the model (their ``context``) is a note beside the call's result.
``PostToolUse`` answers are a note appended to the result the model reads (the stored output
and its digest stay the operation's own) and kept in the receipt's observations.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..ledger import Scope
from ..messages import ToolCall
from ._model import Decision, Surface

if TYPE_CHECKING:
    from ..plugins import HookOutcome

__all__ = ["post_note", "post_tool_use", "pre_note", "pre_tool_use", "tool_input"]


def tool_input(call: ToolCall) -> Any:
    """The call's arguments as JSON (its raw text when they do not parse)."""
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments


def _dispatch(
    name: str,
    scope: Scope,
    surface: Surface,
    cwd: str | None,
    data: dict[str, Any],
    host: object,
) -> HookOutcome:
    # pluggy and the plugins load on the first call judged, never at import (comal --help).
    from ..plugins import HookEvent, lifecycle

    event = HookEvent(
        name,  # type: ignore[arg-type]  # one of the two literals this module dispatches
        scope.tenant,
        scope.agent,
        scope.session,
        surface,
        cwd,
        data,
        host,
    )
    return lifecycle(event)


def pre_tool_use(
    call: ToolCall,
    scope: Scope,
    surface: Surface,
    cwd: str | None,
    decision: Decision,
    host: object = None,
) -> tuple[Decision, dict[str, Any] | None]:
    """``decision`` as the hooks leave it (see the module docstring), and what they answered
    for the receipt (``None`` when no hook answered). ``host``: the house, lent to the hooks."""
    if decision.action == "deny":
        return decision, None
    data = {"tool_name": call.name, "tool_input": tool_input(call), "tool_use_id": call.id}
    outcome = _dispatch("PreToolUse", scope, surface, cwd, data, host)
    if not outcome:
        return decision, None
    body = outcome.as_dict()
    seen = {"results": body["results"], "failures": body["failures"]}
    said = outcome.decision
    if said is None:
        return decision, seen
    reason = f"{said.reason} (hook {said.by})" if said.reason else f"hook {said.by}"
    if said.decision == "deny":
        return Decision.deny(f"hook:{said.by}", reason), seen
    if said.decision == "ask" and decision.action == "allow":
        return Decision.ask(f"hook:{said.by}", reason), seen
    return decision, seen


def post_tool_use(
    call: ToolCall,
    scope: Scope,
    surface: Surface,
    cwd: str | None,
    response: dict[str, Any],
    host: object = None,
) -> HookOutcome:
    """What the hooks said of a call that ran (``response``: its text, error and status)."""
    data = {
        "tool_name": call.name,
        "tool_input": tool_input(call),
        "tool_use_id": call.id,
        "tool_response": response,
    }
    return _dispatch("PostToolUse", scope, surface, cwd, data, host)


def post_note(outcome: HookOutcome) -> str:
    """The note a ``PostToolUse`` outcome appends to the result the model reads ("" if none)."""
    lines = []
    said = outcome.decision
    if said is not None and said.decision == "block":
        lines.append(f"[PostToolUse hook {said.by}: {said.reason}]")
    if outcome.context:
        lines.append(f"[PostToolUse hook context]\n{outcome.context}")
    return "\n".join(lines)


def pre_note(seen: Mapping[str, Any] | None) -> str:
    """What ``PreToolUse`` hooks added for the model (their ``context``), as a note beside the
    call's result, denied or not ("" if none). ``seen``: what the judgment kept of them."""
    said = [r for r in (seen or {}).get("results", ()) if r.get("context")]
    if not said:
        return ""
    body = "\n".join(f"[{r['by']}] {r['context']}" for r in said)
    return f"[PreToolUse hook context]\n{body}"
