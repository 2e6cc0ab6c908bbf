"""The configuration's ``hooks`` in Claude Code's own shape, and the settings files it may be
read from (``hooks_from``).

::

    hooks:
      PreToolUse:
        - matcher: "Bash"
          hooks: [{type: command, command: "~/.claude/hooks/check-bash.sh", timeout: 60}]
    hooks_from: [~/.claude/settings.json, .claude/settings.json]

Every key of a hook entry Claude Code defines is accepted, so a file written for it loads
unchanged; what comal does not run (another ``type`` than ``command``, ``async``, a
PowerShell ``shell``, an event comal has no moment for) is listed, never run. In comal's own
configuration an unknown key is refused, as everywhere in it; in a settings file written for
Claude Code an unknown event or key is listed and left out, since a newer Claude Code may
write one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from .._regex import PatternError, compile_linear

__all__ = [
    "CLAUDE_EVENTS",
    "RUN_EVENTS",
    "HookHandler",
    "HooksSection",
    "MatcherGroup",
    "hooks_adapter",
]

ClaudeEvent = Literal[
    "SessionStart",
    "Setup",
    "UserPromptSubmit",
    "UserPromptExpansion",
    "PreToolUse",
    "PermissionRequest",
    "PermissionDenied",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Notification",
    "MessageDisplay",
    "SubagentStart",
    "SubagentStop",
    "TaskCreated",
    "TaskCompleted",
    "Stop",
    "StopFailure",
    "TeammateIdle",
    "InstructionsLoaded",
    "ConfigChange",
    "CwdChanged",
    "DirectoryAdded",
    "FileChanged",
    "WorktreeCreate",
    "WorktreeRemove",
    "PreCompact",
    "PostCompact",
    "PreModelSwitch",
    "PostModelSwitch",
    "Elicitation",
    "ElicitationResult",
    "SessionEnd",
]
CLAUDE_EVENTS: Final = frozenset(get_args(ClaudeEvent))
# The events comal has a moment for; a hook on any other is listed, not run.
RUN_EVENTS: Final = frozenset(
    {
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
        "SubagentStop",
        "PreCompact",
    }
)
# Claude Code's rule for a matcher: only these characters is a list of exact names, anything
# else a regular expression searched anywhere in the value.
_EXACT = re.compile(r"[A-Za-z0-9_\- ,|]*")
_RULE = re.compile(r"^\s*[A-Za-z0-9_*.\-]+(\(.*\))?\s*$", re.DOTALL)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class HookHandler(_Strict):
    """One hook handler, every field Claude Code defines; comal runs ``type: command``."""

    type: Literal["command", "http", "mcp_tool", "prompt", "agent"] = Field(
        description="command runs; http, mcp_tool, prompt and agent are listed, not run."
    )
    command: str | None = Field(
        default=None,
        min_length=1,
        max_length=10_000,
        description="The shell command (bash -c in the sandbox, cwd the workspace, "
        "$CLAUDE_PROJECT_DIR set); with args, the program to run.",
    )
    args: list[Annotated[str, Field(max_length=10_000)]] | None = Field(
        default=None,
        max_length=1_000,
        description="Exec form: the arguments, each one word (${CLAUDE_PROJECT_DIR} replaced).",
    )
    timeout: float | None = Field(
        default=None,
        gt=0,
        le=86_400,
        description="Seconds before the hook's process group is killed; null: 600 (30 for "
        "UserPromptSubmit), as in Claude Code.",
    )
    if_: str | None = Field(
        default=None,
        min_length=1,
        max_length=2_000,
        alias="if",
        description="A permission rule (Bash(git *), Edit(src/**)) the tool call must match "
        "for the hook to run; tool events only.",
    )
    shell: Literal["bash", "powershell"] | None = Field(
        default=None, description="bash runs; powershell is listed, not run."
    )
    async_: bool = Field(
        default=False, alias="async", description="true: listed, not run (comal waits for "
        "every hook it runs)."
    )  # fmt: skip
    asyncRewake: bool = Field(default=False, description="true: listed, not run.")
    statusMessage: str | None = Field(
        default=None, max_length=2_000, description="Accepted; comal shows no spinner."
    )
    once: bool | None = Field(default=None, description="Accepted; ignored (as in settings).")
    url: str | None = Field(default=None, max_length=4_096, description="type http: not run.")
    headers: dict[str, str] | None = Field(default=None, description="type http: not run.")
    allowedEnvVars: list[str] | None = Field(default=None, description="type http: not run.")
    server: str | None = Field(default=None, max_length=200, description="mcp_tool: not run.")
    tool: str | None = Field(default=None, max_length=200, description="mcp_tool: not run.")
    input: dict[str, Any] | None = Field(default=None, description="mcp_tool: not run.")
    prompt: str | None = Field(default=None, max_length=100_000, description="prompt: not run.")
    model: str | None = Field(default=None, max_length=200, description="prompt: not run.")

    @model_validator(mode="after")
    def _command_given(self) -> HookHandler:
        if self.type == "command" and not self.command:
            raise ValueError("a hook of type command needs its command")
        return self

    @field_validator("if_")
    @classmethod
    def _rule(cls, value: str | None) -> str | None:
        if value is not None and _RULE.match(value) is None:
            raise ValueError(
                f"cannot read the rule {value!r}; write it as Tool or Tool(pattern), "
                "e.g. Bash(git *)"
            )
        return value

    def not_run(self) -> str | None:
        """Why comal does not run this handler (``None``: it runs)."""
        if self.type != "command":
            return f"type {self.type}"
        if self.async_ or self.asyncRewake:
            return "async"
        if self.shell == "powershell":
            return "shell powershell"
        return None


class MatcherGroup(_Strict):
    """One matcher and the handlers it runs."""

    matcher: str | None = Field(
        default=None,
        max_length=4_096,
        description='"*", "" or none: every time; letters, digits, _, -, spaces, "," and '
        '"|" only: exact names (Edit|Write); else a regular expression searched anywhere in '
        "the tool name (source, trigger, agent type).",
    )
    hooks: list[HookHandler] = Field(
        max_length=100, description="The handlers run when the matcher matches."
    )

    @field_validator("matcher")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None and not matches_all(value) and not exact(value):
            try:
                compile_linear(value)
            except PatternError as exc:
                raise ValueError(str(exc)) from None
        return value


def matches_all(matcher: str | None) -> bool:
    """``*``, empty or no matcher: every occurrence of the event."""
    return matcher is None or matcher.strip() in ("", "*")


def exact(matcher: str) -> bool:
    """Claude Code reads ``matcher`` as exact names (else as a regular expression)."""
    return _EXACT.fullmatch(matcher) is not None


HooksSection = dict[ClaudeEvent, Annotated[list[MatcherGroup], Field(max_length=100)]]


@functools.cache
def hooks_adapter() -> TypeAdapter[HooksSection]:
    return TypeAdapter(HooksSection)


def _known(event: str, handler: Any, dropped: list[str]) -> Any:
    """``handler`` without the keys this comal does not know (each noted in ``dropped``)."""
    if not isinstance(handler, Mapping):
        return handler  # the validation says what is wrong with it
    known = {info.alias or name for name, info in HookHandler.model_fields.items()}
    dropped += [
        f"{event}: key {k!r} of a hook (unknown to this comal)" for k in handler if k not in known
    ]
    return {k: v for k, v in handler.items() if k in known}


def lenient(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A settings file's ``hooks`` with what this comal cannot read taken out (events and
    handler keys Claude Code may add later), and what was taken out."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for event, groups in raw.items():
        if event not in CLAUDE_EVENTS:
            dropped.append(f"event {event} (unknown to this comal)")
            continue
        if not isinstance(groups, list):
            kept[event] = groups  # the validation says what is wrong with it
            continue
        kept[event] = [
            {**g, "hooks": [_known(event, h, dropped) for h in g["hooks"]]}
            if isinstance(g, Mapping) and isinstance(g.get("hooks"), list)
            else g
            for g in groups
        ]
    return kept, dropped
