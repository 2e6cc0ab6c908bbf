"""Opening the TUI on a new or resumed session (``comal`` / ``comal --resume UUID``)."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from pathlib import Path

from ..agent import (
    SCRIPT_PREFIX,
    Agent,
    ScriptModel,
    config_path,
    load_config,
    lock_session,
    policy_from_config,
    settings_from_config,
    start_session,
)
from ..errors import ComalError, UserError
from ..ops import Actor, Approver, House, Workspace, default_registry
from ..providers import ModelSpec, Provider, provider_from_spec
from ..tui import ComalApp, TuiSession
from ._common import err, ledger


def run_tui(
    *,
    resume: str | None,
    model: str,
    context_window: int | None,
    mode: str,
    allow: list[str],
    deny: list[str],
    workspace: Path,
) -> int:
    """Open the TUI; returns the exit code. The session lock is held while it is open."""
    try:
        config = load_config().merged({"mode": mode or None, "allow": [*allow], "deny": [*deny]})
        ws = Workspace(workspace)
        user = getpass.getuser()
        with ledger() as led:
            previous = led.session(led.resolve(resume)) if resume else None
            spec = model or (previous.meta.get("model") if previous else None) or config.model
            if not spec:
                raise UserError(
                    "no model: pass --model provider:model (or script:PATH), set COMAL_MODEL, "
                    "or set model in the configuration file"
                )
            if resume:
                scope = led.resolve(resume)
            else:
                meta = {"model": spec, "workspace": str(ws.root)}
                scope = start_session(led, config.tenant, config.agent, title="tui", meta=meta)
            with lock_session(led, scope):
                provider: Provider
                if spec.startswith(SCRIPT_PREFIX):
                    provider, name = ScriptModel.from_spec(spec, led, scope), "script"
                else:
                    provider, name = provider_from_spec(spec), ModelSpec.parse(spec).model
                settings = settings_from_config(
                    config, name, agent=scope.agent, context_window=context_window
                )
                policy = policy_from_config(config, workspace=ws, protect=config_path())
                registry = default_registry()

                def make_agent(approver: Approver, say: Callable[[str, str], None]) -> Agent:
                    house = House(led, scope, registry, policy, workspace=ws, approver=approver)
                    return Agent(led, scope, provider, house, settings, actor=Actor.user(user),
                                 say=say)  # fmt: skip

                controls = House(led, scope, registry, policy, workspace=ws)
                session = TuiSession(
                    led, scope, controls, make_agent, model=name,
                    context_window=context_window, user=user,
                )  # fmt: skip
                ComalApp(session).run()
    except ComalError as exc:
        err.print(f"[bold red]error[/] [{exc.code}] {exc}")
        return 2
    return 0
