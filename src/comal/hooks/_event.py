"""What a hook reads on stdin: the event in Claude Code's shape, comal's names mapped to its.

Common fields: ``session_id``, ``transcript_path``, ``cwd`` (the workspace),
``permission_mode`` (comal's ``read-only``/``ask``/``trusted`` as Claude Code's
``plan``/``default``/``bypassPermissions``) and ``hook_event_name``; then the event's own
(``tool_name``, ``tool_input``, ``tool_use_id``, ``tool_response``, ``prompt``,
``stop_hook_active``, ``last_assistant_message``, ``source``, ``trigger``,
``custom_instructions``; ``agent_id``/``agent_type`` inside a work step).

comal's tools have Claude Code's names (``Bash``, ``Read``, ``Write``, ``Edit``, ``Glob``,
``Grep``, ``WebFetch``, ``mcp__<server>__<tool>``), so a matcher written for it matches the
same calls; their inputs are given in its shape: ``file_path`` (absolute) for ``Read``,
``Write`` and ``Edit``, absolute ``path`` for ``Glob`` and ``Grep``, ``-i`` for ``Grep``'s
``ignore_case``, and Bash's ``timeout`` in milliseconds. A failed call is
``PostToolUseFailure`` (``error``: its text), as in Claude Code.

``transcript_path`` is a file in Claude Code's JSON-lines shape (``type``, ``message`` with
``role`` and content blocks, ``sessionId``, ``uuid``, ``parentUuid``, ``timestamp``,
``cwd``), written from the ledger under a private directory of this process and appended as
the session grows (only when a hook runs); the ledger stays the record (``comal show --json``).
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from ..ledger import Entry, LedgerBackend, Scope
from ..messages import Role
from ..messages.wire import to_anthropic
from ..ops import Workspace
from ..plugins import HookEvent

__all__ = ["MODES", "TOOL_EVENTS", "TRANSCRIPTS", "claude_input", "claude_name", "stdin_event"]

MODES: Final = {"read-only": "plan", "ask": "default", "trusted": "bypassPermissions"}
TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
_FILE_TOOLS: Final = frozenset({"Read", "Write", "Edit"})
_SEARCH_TOOLS: Final = frozenset({"Glob", "Grep"})


def claude_name(event: HookEvent) -> str:
    """The Claude Code event ``event`` is: a failed call's ``PostToolUse`` is
    ``PostToolUseFailure``."""
    if event.name == "PostToolUse":
        response = event.data.get("tool_response")
        if isinstance(response, Mapping) and response.get("is_error"):
            return "PostToolUseFailure"
    return event.name


def match_value(name: str, data: Mapping[str, Any]) -> str | None:
    """What the event's matchers are matched against (``None``: it has no matchers)."""
    if name in TOOL_EVENTS:
        return str(data.get("tool_name", ""))
    field = {"SessionStart": "source", "PreCompact": "trigger", "SubagentStop": "agent_type"}
    key = field.get(name)
    return str(data.get(key) or "") if key is not None else None


def _absolute(workspace: Workspace, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return str(workspace.resolve(raw))
    except Exception:  # a path the house refused: shown as written, joined to the root
        return str(workspace.root / raw)


def claude_input(tool: str, given: Any, workspace: Workspace) -> Any:
    """A comal call's arguments in Claude Code's shape for ``tool``."""
    if not isinstance(given, Mapping):
        return given
    out = dict(given)
    if tool in _FILE_TOOLS and "path" in out:
        out = {"file_path": _absolute(workspace, out.pop("path")), **out}
    if tool in _SEARCH_TOOLS and "path" in out:
        out["path"] = _absolute(workspace, out["path"])
    if tool == "Grep" and "ignore_case" in out:
        out["-i"] = out.pop("ignore_case")
    if tool == "Bash" and isinstance(out.get("timeout"), int | float):
        out["timeout"] = int(out["timeout"] * 1000)
    return out


def comal_input(tool: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Claude Code's input for ``tool`` in comal's names (a hook's ``updatedInput``)."""
    out = dict(given)
    if tool in _FILE_TOOLS and "file_path" in out:
        out = {"path": out.pop("file_path"), **out}
    if tool == "Grep" and "-i" in out:
        out["ignore_case"] = out.pop("-i")
    if tool == "Bash" and isinstance(out.get("timeout"), int | float):
        out["timeout"] = out["timeout"] / 1000
    return out


def stdin_event(
    name: str, event: HookEvent, workspace: Workspace, mode: str, transcript: str | None
) -> dict[str, Any]:
    """What a hook on ``name`` reads on stdin (see the module docstring)."""
    data = dict(event.data)
    if "tool_input" in data:
        data["tool_input"] = claude_input(str(data.get("tool_name")), data["tool_input"], workspace)
    if name == "PostToolUseFailure":
        response = data.pop("tool_response", None) or {}
        data["error"] = response.get("text", "")
        data["is_interrupt"] = False
    if name == "PreCompact":
        data["custom_instructions"] = data.get("custom_instructions") or None
    return {
        "session_id": event.session,
        "transcript_path": transcript,
        "cwd": event.cwd or str(workspace.root),
        "permission_mode": MODES.get(mode, "default"),
        "hook_event_name": name,
        **data,
    }


def _line(entry: Entry, cwd: str, parent: str | None) -> dict[str, Any]:
    message = entry.message
    try:
        wire: Any = to_anthropic([message], inline_system=True)["messages"][0]
    except (IndexError, ValueError, TypeError, KeyError):
        wire = {"role": message.role.value, "content": message.text}
    kind = "assistant" if message.role is Role.ASSISTANT else "user"
    if message.role is Role.SYSTEM:
        kind = "system"
    return {
        "type": kind,
        "sessionId": entry.session,
        "uuid": f"{entry.session}:{entry.seq}",
        "parentUuid": parent,
        "timestamp": entry.created_at,
        "cwd": cwd,
        "message": wire,
    }


class Transcripts:
    """Each session's transcript file (see the module docstring), written incrementally."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._done: dict[tuple[str, str, str, str], tuple[int, str | None]] = {}

    @property
    def folder(self) -> Path:
        if self._dir is None:
            made = Path(tempfile.mkdtemp(prefix="comal-hooks-"))
            atexit.register(shutil.rmtree, made, True)
            self._dir = made
        return self._dir

    def write(self, ledger: LedgerBackend, scope: Scope, cwd: str) -> Path:
        """The session's transcript file, brought up to date with the ledger."""
        where = str(getattr(ledger, "path", id(ledger)))
        key = (where, scope.tenant, scope.agent, scope.session)
        with self._lock:
            path = self.folder / f"{scope.session}.jsonl"
            start, parent = self._done.get(key, (0, None))
            entries = ledger.entries(scope, start_seq=start)
            if entries or not path.exists():
                with path.open("a", encoding="utf-8") as fh:
                    for entry in entries:
                        fh.write(json.dumps(_line(entry, cwd, parent), ensure_ascii=False) + "\n")
                        parent = f"{entry.session}:{entry.seq}"
            if entries:
                self._done[key] = (entries[-1].seq + 1, parent)
            return path


TRANSCRIPTS: Final = Transcripts()
