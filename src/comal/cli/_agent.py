"""``comal -p PROMPT`` and ``comal --resume UUID [-p PROMPT]``: the agent, headless.

:func:`run_prompt` is called by the root callback. It loads the configuration (CFG-1), merges
the environment and the flags over it, opens the ledger, takes the session's lock (RES-2) and
runs the loop of :class:`comal.agent.Agent`: progress streams to stderr, the answer goes to
stdout (``--json``: ``{"session", "status", "answer", "turns", "receipts", "usage"}``).

Exit codes: 0 when the session finished (answered and its checks passed), 3 when the run stopped
at ``--max-turns`` (``--resume`` continues it), 2 on a coded error (spend cap, repeated
OUTPUT_LENGTH or CONTEXT_LENGTH, a locked session, bad configuration...), whose code and message
are printed (in the JSON too).

Flags left empty (``""``, ``0``, ``None``) mean "not given": the environment, the configuration
file and the defaults decide, in that order of precedence — except the model of a resumed
session, which is the one the session was started with unless ``--model`` names another.
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..agent import (
    SCRIPT_PREFIX,
    Agent,
    RunResult,
    ScriptModel,
    config_path,
    load_config,
    lock_session,
    policy_from_config,
    settings_from_config,
    start_session,
)
from ..errors import ComalError, UserError
from ..ledger import Scope, SQLiteLedger
from ..ops import Actor, House, Workspace, default_registry
from ..providers import (
    ModelSpec,
    Provider,
    SDKProvider,
    StreamDone,
    StreamEvent,
    TextDelta,
    provider_from_spec,
)
from ..tokens import default_counter
from ._common import emit_json, ledger

__all__ = ["EXIT_CODES", "run_prompt"]

EXIT_CODES = {"finished": 0, "error": 2, "max_turns": 3}
_STYLE = {"turn": "dim", "call": "cyan", "result": "green", "note": "dim", "warn": "yellow"}
_PREVIEW = 200


class _Progress:
    """Progress on stderr: one line per event, streamed text as it arrives."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._mid_line = False

    def say(self, kind: str, text: str) -> None:
        self._end_line()
        style = _STYLE.get(kind, "")
        if kind == "result" and any(w in text for w in (": error", ": denied", ": uncertain")):
            style = "red"
        line = text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"
        prefix = {"call": "→ ", "result": "  ", "warn": "! "}.get(kind, "")
        self.console.print(f"[{style}]{escape(prefix + line)}[/]" if style else escape(line))

    def event(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.console.file.write(event.text)
            self.console.file.flush()
            self._mid_line = not event.text.endswith("\n")
        elif isinstance(event, StreamDone):
            self._end_line()

    def _end_line(self) -> None:
        if self._mid_line:
            self.console.file.write("\n")
            self._mid_line = False


def _provider(spec: str, led: SQLiteLedger, scope: Scope) -> tuple[Provider, str]:
    """The provider a ``--model`` string names and the model name its requests carry."""
    if spec.startswith(SCRIPT_PREFIX):
        return ScriptModel.from_spec(spec, led, scope), "script"
    return provider_from_spec(spec), ModelSpec.parse(spec).model


def _normalize(spec: str) -> str:
    # A script path is stored absolute in the session, so a resume from elsewhere finds it.
    if spec.startswith(SCRIPT_PREFIX):
        return SCRIPT_PREFIX + str(Path(spec.removeprefix(SCRIPT_PREFIX)).expanduser().resolve())
    return spec


def _session(
    led: SQLiteLedger,
    prompt: str | None,
    resume: str | None,
    tenant: str,
    agent: str,
    meta: dict[str, Any],
) -> Scope:
    if resume:
        return led.resolve(resume)
    if prompt is None:
        raise UserError("nothing to do: give a prompt with -p, or --resume a session")
    title = prompt.strip().splitlines()[0][:80] if prompt.strip() else None
    return start_session(led, tenant, agent, title=title, meta=meta)


def run_prompt(
    prompt: str | None,
    *,
    resume: str | None,
    model: str,
    context_window: int | None,
    engine: str,
    mode: str,
    allow: list[str],
    deny: list[str],
    workspace: Path,
    as_json: bool,
    max_turns: int,
) -> int:
    """Run (or resume) a session headless; returns the exit code (see the module docstring)."""
    progress = _Progress(Console(stderr=True, highlight=False))
    session: str | None = None
    try:
        config = load_config()
        config = config.merged(
            {
                "mode": mode or None,
                "max_turns": max_turns or None,
                "engine": engine or None,
                "allow": [*config.allow, *allow],
                "deny": [*config.deny, *deny],
            }
        )
        ws = Workspace(workspace)
        with ledger() as led:
            previous = led.session(led.resolve(resume)) if resume else None
            spec = model or (previous.meta.get("model") if previous else None) or config.model
            if not spec:
                raise UserError(
                    "no model: pass --model provider:model (e.g. anthropic:claude-sonnet-4-6, "
                    "or script:PATH), set COMAL_MODEL, or set model in the configuration file"
                )
            spec = _normalize(spec)
            meta = {"model": spec, "workspace": str(ws.root), "tools_tokens": _tools_tokens()}
            scope = _session(led, prompt, resume, config.tenant, config.agent, meta)
            session = scope.session
            with lock_session(led, scope):
                provider, name = _provider(spec, led, scope)
                try:
                    settings = settings_from_config(
                        config, name, agent=scope.agent, context_window=context_window
                    )
                    policy = policy_from_config(config, workspace=ws, protect=config_path())
                    # Headless: no approver, so a call the policy would ask about is denied, and
                    # the denial says so (the model reads it in the result).
                    house = House(led, scope, default_registry(), policy, workspace=ws)
                    if policy.mode == "ask":
                        progress.say(
                            "note",
                            "mode ask without an approver: calls that need approval are denied "
                            "(allow them with --allow RULE, or use --mode trusted)",
                        )
                    agent = Agent(
                        led,
                        scope,
                        provider,
                        house,
                        settings,
                        actor=Actor.user(_user()),
                        on_event=progress.event,
                        say=progress.say,
                    )
                    progress.say("note", f"session {scope.session} · {spec} · {ws.root}")
                    try:
                        result = agent.resume(prompt) if resume else agent.run(prompt)
                    except ComalError as exc:
                        # Read while the ledger is open: the partial run's receipts and usage.
                        result = agent.result("error", exc)
                finally:
                    if isinstance(provider, SDKProvider):
                        provider.close()
    except ComalError as exc:
        error = {"code": exc.code, "message": str(exc)}
        result = RunResult(session or "", "error", "", 0, error=error)
    if result.error is not None:
        progress.say("warn", f"[{result.error['code']}] {result.error['message']}")
    _report(result, as_json, progress)
    return EXIT_CODES[result.status]


def _report(result: RunResult, as_json: bool, progress: _Progress) -> None:
    if as_json:
        data = result.as_dict()
        emit_json(
            {k: data[k] for k in ("session", "status", "answer", "turns", "receipts", "usage")}
            | ({"error": data["error"]} if "error" in data else {})
            | ({"blocked": data["blocked"]} if data["blocked"] else {})
        )
        return
    if result.answer and result.status != "error":
        sys.stdout.write(result.answer.rstrip("\n") + "\n")
        sys.stdout.flush()
    if result.blocked:
        progress.say("warn", f"blocked (uncertain, not repeated): {', '.join(result.blocked)}")
    if result.status == "max_turns":
        progress.say("warn", f"not finished: resume with `comal --resume {result.session}`")


def _tools_tokens() -> int:
    # Recorded in the session's meta so ``comal context`` can budget it without running it.
    return default_counter().count(default_registry().catalog("model").json("anthropic"))


def _user() -> str:
    try:
        return getpass.getuser() or "user"
    except (KeyError, OSError):
        return "user"
