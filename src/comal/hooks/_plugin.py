"""The built-in plugin ``comal-hooks``: the operator's command hooks on the lifecycle seam.

For each lifecycle event it is told, it finds the house the event came from
(:attr:`~comal.plugins.HookEvent.host`) and that house's hooks (the operator's configuration,
:class:`~comal.hooks.CommandHooks`); a surface without a house (the proxy, a replay) runs
none. It picks the handlers whose matcher (and ``if`` rule, on tool events) fits, runs each in
the house's sandbox at once (:mod:`._run`; a handler written twice runs once), and answers
one :class:`~comal.plugins.HookResult` per run: its decision, reason and context read as
Claude Code reads them (:mod:`._reply`) and the run's record, which whoever dispatched the
event keeps in the ledger — the call's receipt for ``PreToolUse``/``PostToolUse``, a ``hook``
event of the session for the others.

A decision goes through the seam's rules: a hook never widens (``allow`` is no objection),
``deny`` refuses a call, ``ask`` makes a person approve it, ``block`` refuses a prompt, notes
a reason on a call's result, or makes the agent go on (at most 5 times a run).
``PreCompact`` hooks are told; a compaction is the engine's and the operator's, so their block
is recorded and not obeyed. A rewritten input (``updatedInput``) is never run unjudged: the
call is refused, and the model is told the input the hook would have it propose instead.
``SessionStart`` hooks run at a session's first run in this process (``startup`` or
``resume``), not again at each prompt of the same process.
"""

from __future__ import annotations

import json
import shlex
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from ..errors import ComalError
from ..ops import House, Rule
from ..plugins import HookEvent, HookResult, hookimpl
from ._event import TOOL_EVENTS, TRANSCRIPTS, claude_name, comal_input, match_value, stdin_event
from ._reply import Reply, read_reply
from ._run import HookRun, cut, hook_sandbox, run_hook
from ._set import CommandHooks, Configured

__all__ = ["NAME", "answer", "forget_started"]

NAME: Final = "comal-hooks"
# Claude Code's defaults, in seconds.
DEFAULT_TIMEOUT: Final = 600.0
PROMPT_TIMEOUT: Final = 30.0
# Runs at once for one event (Claude Code runs every matching hook in parallel).
PARALLEL: Final = 8
_PLACEHOLDER: Final = "${CLAUDE_PROJECT_DIR}"


_lock = threading.Lock()
_started: set[tuple[str, str]] = set()


def _first_start(house: House) -> bool:
    """Is this the first run of the house's session in this process? Claude Code runs
    ``SessionStart`` hooks when a session starts or is resumed, not at each prompt (each is a
    run of comal's agent)."""
    key = (str(getattr(house.ledger, "path", id(house.ledger))), house.scope.session)
    with _lock:
        first = key not in _started
        _started.add(key)
    return first


def forget_started() -> None:
    """Forget which sessions started in this process, as a new process would (tests)."""
    with _lock:
        _started.clear()


def _house(event: HookEvent) -> House | None:
    house = event.host
    if not isinstance(house, House) or house.workspace is None:
        return None
    hooks = house.hooks
    return house if isinstance(hooks, CommandHooks) and hooks else None


def _holds(rule_text: str, tool: str, given: Any, house: House) -> bool:
    """The ``if`` rule fits the call; a call it cannot be read against runs the hook, as in
    Claude Code (the filter narrows, it never guards)."""
    try:
        rule = Rule.parse(rule_text, "deny")  # deny: any part of a compound command may match
    except ComalError:
        return True
    op = house.registry.get(tool)
    if op is None or not isinstance(given, dict):
        return rule.pattern is None and rule.operation in (tool, "*")
    try:
        args = op.input.model_validate(given)
        subject = op.subject(args) if op.subject is not None else None
        if subject is not None and op.subject_kind == "path" and house.workspace is not None:
            subject = house.workspace.locate(subject)
    except (ValidationError, ComalError, OSError):
        return True
    return rule.matches(op, subject)


def _command(configured: Configured, root: str) -> str:
    handler = configured.handler
    command = handler.command or ""
    if handler.args is None:
        return command  # shell form: the shell expands "$CLAUDE_PROJECT_DIR" itself
    argv = [part.replace(_PLACEHOLDER, root) for part in (command, *handler.args)]
    return shlex.join(argv)


def _run_all(
    chosen: list[Configured],
    name: str,
    stdin: dict[str, Any],
    house: House,
    readable: tuple[Path, ...],
) -> list[HookRun]:
    assert house.workspace is not None
    root = house.workspace.root
    sandbox = hook_sandbox(house.sandbox(), readable)
    default = PROMPT_TIMEOUT if name == "UserPromptSubmit" else DEFAULT_TIMEOUT

    def one(item: Configured) -> HookRun:
        timeout = item.handler.timeout or default
        command = _command(item, str(root))
        return run_hook(command, stdin, cwd=root, timeout=timeout, sandbox=sandbox)

    if len(chosen) == 1:
        return [one(chosen[0])]
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(chosen))) as pool:
        return list(pool.map(one, chosen))


def _decision(name: str, reply: Reply, given: Any, tool: str) -> tuple[Any, str, str]:
    """(decision, reason, context) the seam takes from ``reply`` on event ``name``."""
    context = reply.context
    if name == "PreToolUse":
        if reply.block:
            return "deny", reply.reason or "refused by a PreToolUse hook", context
        if reply.updated_input is not None and reply.updated_input != given:
            proposed = json.dumps(comal_input(tool, reply.updated_input), ensure_ascii=False)
            why = (
                "a PreToolUse hook rewrote this call's input, and comal runs no call the house "
                f"has not judged as proposed; propose it again as {tool} {proposed}"
            )
            return "deny", f"{reply.reason}; {why}" if reply.reason else why, context
        if reply.ask:
            return "ask", reply.reason or "a PreToolUse hook asks for a person's approval", context
        return None, "", context
    if name in ("UserPromptSubmit", "PostToolUse", "PostToolUseFailure"):
        return ("block", reply.reason, context) if reply.block else (None, "", context)
    if name in ("Stop", "SubagentStop"):
        if reply.block:
            return "block", reply.reason, context
        # Claude Code goes on for a Stop hook's additionalContext too, within the same bound.
        return ("block", context, "") if context else (None, "", "")
    if name == "SessionStart":
        return None, "", context
    return None, "", ""  # PreCompact: told, never obeyed


def _results(name: str, item: Configured, run: HookRun, given: Any, tool: str) -> list[HookResult]:
    reply = read_reply(name, run)
    decision, reason, context = _decision(name, reply, given, tool)
    record = {
        "event": name,
        "matcher": item.matcher,
        "source": item.source,
        **run.record(),
        "reply": {k: cut(v) if isinstance(v, str) else v for k, v in reply.as_dict().items()},
    }
    if name == "PreCompact" and reply.block:
        record["not_obeyed"] = "a hook does not block comal's compaction"
    out = [HookResult(decision, reason, context, record=record)]
    if reply.stop is not None:
        out.append(HookResult(reason=reply.stop, stop=True))
    return out


def answer(event: HookEvent) -> list[HookResult] | None:
    """Every configured hook that fits ``event``, run; one result per run (module docstring)."""
    house = _house(event)
    if house is None or house.workspace is None:
        return None
    name = claude_name(event)
    if name in ("SessionStart", "UserPromptSubmit") and "agent_id" in event.data:
        return None  # a work step is no person's session: Claude Code tells its subagents neither
    if name == "SessionStart" and not _first_start(house):
        return None
    hooks = house.hooks
    assert isinstance(hooks, CommandHooks)
    chosen = hooks.select(name, match_value(name, event.data))
    tool = str(event.data.get("tool_name", ""))
    given = event.data.get("tool_input")
    if name in TOOL_EVENTS:
        chosen = [
            c for c in chosen if c.handler.if_ is None or _holds(c.handler.if_, tool, given, house)
        ]
    else:
        chosen = [c for c in chosen if c.handler.if_ is None]  # Claude Code: never off tool events
    if not chosen:
        return None
    root = str(house.workspace.root)
    try:
        transcript: Path | None = TRANSCRIPTS.write(house.ledger, house.scope, root)
    except OSError:
        transcript = None  # the hooks still run; they are told there is no transcript
    path = str(transcript) if transcript is not None else None
    stdin = stdin_event(name, event, house.workspace, house.settings.mode, path)
    readable = (transcript.parent,) if transcript is not None else ()
    runs = _run_all(chosen, name, stdin, house, readable)
    claude_given = stdin.get("tool_input")
    out: list[HookResult] = []
    for item, run in zip(chosen, runs, strict=True):
        out += _results(name, item, run, claude_given, tool)
    return out


@hookimpl
def comal_session_start(event: HookEvent) -> list[HookResult] | None:
    return answer(event)


@hookimpl
def comal_user_prompt_submit(event: HookEvent) -> list[HookResult] | None:
    return answer(event)


@hookimpl
def comal_pre_tool_use(event: HookEvent) -> list[HookResult] | None:
    return answer(event)


@hookimpl
def comal_post_tool_use(event: HookEvent) -> list[HookResult] | None:
    return answer(event)


@hookimpl
def comal_stop(event: HookEvent) -> list[HookResult] | None:
    return answer(event)


@hookimpl
def comal_subagent_stop(event: HookEvent) -> list[HookResult] | None:
    return answer(event)


@hookimpl
def comal_pre_compact(event: HookEvent) -> list[HookResult] | None:
    return answer(event)
