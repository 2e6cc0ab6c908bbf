"""The configuration's ``hooks`` and ``hooks_from`` (operator-only, DRV-6): their fields, the
hooks a surface's houses run, and their part of the configuration reference. Kept apart from
:mod:`._config` so that module stays one concern; the shape itself is :mod:`comal.hooks`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from ..hooks import CommandHooks, HookHandler, HooksSection, MatcherGroup, command_hooks
from ..ops import Rule, Workspace
from ._config_doc import Row, field_rows

__all__ = [
    "HOOKS_FIELD",
    "HOOKS_FROM_FIELD",
    "HOOKS_PROSE",
    "HooksFile",
    "hooks_rows",
    "house_hooks",
    "protect_hooks_files",
]

HooksFile = Annotated[str, Field(min_length=1, max_length=4_096)]

HOOKS_FIELD: Any = Field(
    default_factory=dict,
    description="Commands run at the agent's moments, in Claude Code's shape: {PreToolUse: "
    "[{matcher: Bash, hooks: [{type: command, command: …, timeout: 60}]}]} (operator-only; "
    "see the hooks section below and docs/agent.md).",
)
HOOKS_FROM_FIELD: Any = Field(
    default_factory=list,
    max_length=20,
    description="Claude Code settings files whose hooks run too, read once per process "
    "(~/.claude/settings.json must exist; a relative path is the workspace's, e.g. "
    ".claude/settings.json, and may be absent) (operator-only).",
)


def house_hooks(hooks: HooksSection, files: list[str], workspace: Workspace | None) -> CommandHooks:
    """The command hooks the houses of a surface working in ``workspace`` run."""
    root = workspace.root if workspace is not None else None
    return command_hooks(hooks, files, root=root)


def protect_hooks_files(hooks: CommandHooks, workspace: Workspace | None) -> list[Rule]:
    """Deny rules for the model's Write and Edit of each settings file read that lies in the
    workspace: the model does not write the hooks the operator named (CFG-2)."""
    if workspace is None:
        return []
    rules = []
    for name in hooks.files:
        path = Path(name)
        if workspace.contains(path):
            rel = workspace.rel(path)
            rules += [Rule(op, rel, "deny") for op in ("Write", "Edit")]
    return rules


HOOKS_PROSE = (
    "Claude Code's hook configuration, unchanged: an event name, a list of matcher groups, "
    "each with its handlers. The events comal runs: `SessionStart`, `UserPromptSubmit`, "
    "`PreToolUse`, `PostToolUse`, `PostToolUseFailure`, `Stop`, `SubagentStop`, "
    "`PreCompact`; every other event Claude Code defines is accepted and not run, and so is "
    "a handler of another type than `command`, an `async` one or a PowerShell one. A command "
    "runs with `bash -c` in the session's OS sandbox, the workspace its working directory, "
    "the event as JSON on stdin, killed with its process group at its timeout; each run is "
    "recorded in the ledger. `hooks_from` names Claude Code settings files "
    "(`~/.claude/settings.json`, `.claude/settings.json`) whose `hooks` run as well, read "
    "once per process. What each answer does, and where comal differs from Claude Code: "
    "[agent.md](agent.md#hooks)."
)


def hooks_rows() -> list[Row]:
    """The rows of the ``hooks`` section of ``docs/configuration.md``."""
    rows = [r for r in field_rows(MatcherGroup, "hooks.<Event>[].") if not r[0].endswith("hooks")]
    rows += [(f"hooks.<Event>[].hooks[].{r[0]}", *r[1:]) for r in field_rows(HookHandler)]
    return [
        (k.replace(".if_", ".if").replace(".async_", ".async"), t, d, a, x)
        for k, t, d, a, x in rows
    ]
