"""Hooks in Claude Code's shape (DRV-6): the operator's commands, run at the lifecycle's
moments with the event as JSON on stdin, in the sandbox, bounded and recorded.

The configuration holds them as Claude Code writes them (``hooks:``, :mod:`._config`), or
names Claude Code settings files to read them from (``hooks_from:``); :func:`command_hooks`
makes them one frozen value (:class:`CommandHooks`) that the agent's house factory gives every
house. The built-in plugin ``comal-hooks`` (:mod:`._plugin`) implements the lifecycle
hookspecs (:mod:`comal.plugins._lifecycle`) and runs them: the stdin event
(:mod:`._event`), the run (:mod:`._run`), what its exit code and output say (:mod:`._reply`).
``docs/agent.md`` ("Hooks") is the guide.

The model has no operation that reaches any of this: the configuration is the operator's
(CFG-2), a settings file is read once per process, and a hook's decision goes through the
seam, which never widens what the house decided.
"""

from __future__ import annotations

from ._config import CLAUDE_EVENTS, RUN_EVENTS, HookHandler, HooksSection, MatcherGroup
from ._set import CommandHooks, Configured, HooksFileError, command_hooks, matches

__all__ = [
    "CLAUDE_EVENTS",
    "RUN_EVENTS",
    "CommandHooks",
    "Configured",
    "HookHandler",
    "HooksFileError",
    "HooksSection",
    "MatcherGroup",
    "command_hooks",
    "matches",
]
