"""Human-audience controls (OPS-6): model, effort, mode, name and login.

They change a live session's host settings, so they exist only on the human surfaces that hold
one, the TUI and the API (a command line process ends with its call: there the flags ``--model``,
``--effort``, ``--mode`` set them, and ``comal rename`` names a session). ``name`` renames the
session in the ledger, as ``comal rename`` does, so every surface shows the new title. The
model's catalog never lists them, and a model proposal naming one, or a guess such as
``set_mode`` or ``SwitchModel``, is rejected by the judge and recorded like any other judgment.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from ._model import CallContext, Effect, Mode, Surface, ToolOutput
from ._operation import Operation

__all__ = ["HUMAN_CONTROLS", "human_controls", "is_human_control"]

HUMAN_CONTROLS = frozenset({"model", "effort", "mode", "name", "login"})
_VERBS = re.compile(r"^(set|change|switch|update|use|select)")


def is_human_control(name: str) -> bool:
    """True for a control's name and the obvious guesses at it (case, separators, verbs)."""
    key = re.sub(r"[^a-z]", "", name.lower())
    return key in HUMAN_CONTROLS or _VERBS.sub("", key) in HUMAN_CONTROLS


class ModelArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str = Field(min_length=1, description="Model id for the next requests.")


class EffortArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    effort: str = Field(min_length=1, description="Reasoning effort, e.g. low, medium, high.")


class ModeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Mode = Field(description="read-only, ask (ask for writes) or trusted.")


class NameArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, max_length=200, description="A name for this session.")


class LoginArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    provider: str = Field(min_length=1, description="Provider to log in to.")


def _set(field_name: str) -> Callable[[BaseModel, CallContext], ToolOutput]:
    def handler(args: BaseModel, ctx: CallContext) -> ToolOutput:
        value = getattr(args, field_name)
        before = getattr(ctx.settings, field_name)
        setattr(ctx.settings, field_name, value)
        # Unset is the provider's (or the configuration's) default, said as such, not "None".
        shown = "default" if before is None else before
        return ToolOutput(
            f"{field_name}: {shown} -> {value}", observations={"before": before, "after": value}
        )

    return handler


def _name(args: NameArgs, ctx: CallContext) -> ToolOutput:
    """The session's title in the ledger, which ``comal sessions`` and every surface show;
    the host's copy follows it."""
    info = ctx.ledger.session(ctx.scope)
    before = info.title if info is not None else None
    ctx.ledger.rename_session(ctx.scope, args.name)
    ctx.settings.name = args.name
    shown = "(untitled)" if before is None else repr(before)
    return ToolOutput(
        f"renamed {shown} to {args.name!r}", observations={"before": before, "after": args.name}
    )


def human_controls(login: Callable[[str], str] | None = None) -> list[Operation]:
    """The control operations. ``login`` (provider -> account) is the host's own login flow;
    without one there is no login operation to offer."""
    human: frozenset[Surface] = frozenset({"tui", "api"})
    ops = [
        Operation(
            "model", "Choose the model.", ModelArgs, _set("model"), audience="human", surfaces=human
        ),
        Operation(
            "effort",
            "Set the reasoning effort.",
            EffortArgs,
            _set("effort"),
            audience="human",
            surfaces=human,
        ),
        Operation(
            "mode",
            "Set the permission mode.",
            ModeArgs,
            _set("mode"),
            audience="human",
            surfaces=human,
        ),
        Operation("name", "Name this session.", NameArgs, _name, audience="human", surfaces=human),
    ]
    if login is not None:
        flow = login

        def do_login(args: LoginArgs, ctx: CallContext) -> ToolOutput:
            account = flow(args.provider)
            ctx.settings.account = account
            return ToolOutput(f"logged in to {args.provider} as {account}")

        ops.append(
            Operation(
                "login",
                "Log in to a provider.",
                LoginArgs,
                do_login,
                audience="human",
                surfaces=human,
                effects=(Effect("network"),),
            )
        )
    return ops
