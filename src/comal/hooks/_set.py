"""The operator's command hooks as one frozen value: what the configuration's ``hooks`` and
the settings files of ``hooks_from`` declare, read once per process.

A settings file is Claude Code's ``settings.json`` (``~/.claude/settings.json``,
``.claude/settings.json`` …): only its ``hooks`` (and ``disableAllHooks``) are read, the rest
is Claude Code's business. A relative path is the workspace's file; one that is not there
gives no hooks (a project without them), while a path written absolute or from ``~`` must
exist. A file is read the first time a house of this process needs it and kept: the hooks a
process runs do not change under it, whoever edits the file afterwards.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._regex import compile_linear
from ..errors import InputError
from ._config import (
    RUN_EVENTS,
    HookHandler,
    MatcherGroup,
    exact,
    hooks_adapter,
    lenient,
    matches_all,
)

__all__ = ["CommandHooks", "Configured", "HooksFileError", "command_hooks", "matches"]

CONFIGURATION = "configuration"


class HooksFileError(InputError):
    """A settings file named under ``hooks_from`` is missing or does not hold hooks."""

    code = "HOOKS_FILE"


@dataclass(frozen=True, slots=True)
class Configured:
    """One handler comal runs: its event, its group's matcher, and where it was written."""

    event: str
    matcher: str | None
    handler: HookHandler
    source: str

    @property
    def key(self) -> tuple[str, str, tuple[str, ...] | None, str | None]:
        """What makes two handlers the same one (Claude Code runs a duplicate once)."""
        h = self.handler
        return self.event, h.command or "", tuple(h.args) if h.args is not None else None, h.if_


@dataclass(frozen=True, slots=True)
class CommandHooks:
    """Every handler comal runs, in the order written (the configuration's, then each file's),
    and what it does not run, with why."""

    handlers: tuple[Configured, ...] = ()
    skipped: tuple[str, ...] = ()
    files: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.handlers)

    def select(self, event: str, value: str | None) -> list[Configured]:
        """The handlers of ``event`` whose matcher matches ``value`` (the tool name, the
        source, the trigger, the agent type; ``None`` for an event without matchers)."""
        seen: set[tuple[Any, ...]] = set()
        out: list[Configured] = []
        for item in self.handlers:
            if item.event != event or item.key in seen:
                continue
            if value is not None and not matches(item.matcher, value):
                continue
            seen.add(item.key)
            out.append(item)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "handlers": [
                {"event": c.event, "matcher": c.matcher, "command": c.handler.command,
                 "source": c.source}
                for c in self.handlers
            ],
            "skipped": list(self.skipped),
            "files": list(self.files),
        }  # fmt: skip


def matches(matcher: str | None, value: str) -> bool:
    """Claude Code's matcher rule: ``*``, empty or none match all; exact names separated by
    ``|`` or ``,``; otherwise a regular expression found anywhere in ``value`` (RE2)."""
    if matcher is None or matches_all(matcher):
        return True
    if exact(matcher):
        return value in {name.strip() for name in re.split(r"[|,]", matcher)}
    return compile_linear(matcher).search(value) is not None


def _groups(
    section: Mapping[Any, Sequence[MatcherGroup]], source: str
) -> tuple[list[Configured], list[str]]:
    run: list[Configured] = []
    skipped: list[str] = []
    for event, groups in section.items():
        for group in groups:
            for handler in group.hooks:
                what = handler.command or handler.url or handler.tool or handler.type
                why = None if event in RUN_EVENTS else "an event comal has no moment for"
                why = why or handler.not_run()
                if why is not None:
                    skipped.append(f"{source}: {event} {what!r} ({why})")
                    continue
                run.append(Configured(event, group.matcher, handler, source))
    return run, skipped


_lock = threading.Lock()
_read: dict[Path, tuple[dict[str, list[MatcherGroup]], tuple[str, ...]]] = {}


def _parse(path: Path) -> tuple[dict[str, list[MatcherGroup]], tuple[str, ...]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise HooksFileError(f"cannot read the hooks file: {exc}", path=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise HooksFileError(
            f"not valid JSON: {exc.msg}; fix the file or remove it from hooks_from",
            path=str(path),
            line=exc.lineno,
        ) from exc
    if not isinstance(data, dict):
        raise HooksFileError("a settings file must hold a JSON object", path=str(path))
    raw = data.get("hooks") or {}
    if data.get("disableAllHooks") is True:
        return {}, (f"{path}: disableAllHooks is true, so none of its hooks runs",)
    if not isinstance(raw, dict):
        raise HooksFileError("its hooks must be an object of events", path=str(path), field="hooks")
    kept, dropped = lenient(raw)
    try:
        section = hooks_adapter().validate_python(kept)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in ("hooks", *err["loc"]))
        raise HooksFileError(
            f"invalid hook: {err['msg']}; fix it in the file or remove the file from hooks_from",
            path=str(path),
            field=field,
        ) from exc
    return {str(k): v for k, v in section.items()}, tuple(f"{path}: {d}" for d in dropped)


def _read_file(path: Path) -> tuple[dict[str, list[MatcherGroup]], tuple[str, ...]]:
    with _lock:
        if path not in _read:
            _read[path] = _parse(path)
        return _read[path]


def _located(written: str, root: Path | None) -> Path | None:
    """The file ``written`` names; ``None`` for a relative one there is no workspace for."""
    path = Path(written).expanduser()
    if path.is_absolute():
        return path.resolve()
    return (root / path).resolve() if root is not None else None


def command_hooks(
    section: Mapping[Any, Sequence[MatcherGroup]],
    files: Iterable[str] = (),
    *,
    root: Path | None = None,
) -> CommandHooks:
    """The hooks of the configuration's ``hooks`` and of each file of ``hooks_from`` (relative
    to the workspace ``root``), or :class:`HooksFileError` naming the file."""
    handlers, skipped = _groups(section, CONFIGURATION)
    read: list[str] = []
    for written in files:
        path = _located(written, root)
        if path is None:
            continue  # a project's file, and no project: a house without a workspace
        if not path.exists():
            if Path(written).expanduser().is_absolute():
                raise HooksFileError(
                    "hooks_from names this file and there is no such file; create it or "
                    "remove it from hooks_from",
                    path=str(path),
                )
            continue  # a project without a settings file of its own
        section_of, dropped = _read_file(path)
        more, left_out = _groups(section_of, str(path))
        handlers += more
        skipped += [*dropped, *left_out]
        read.append(str(path))
    return CommandHooks(tuple(handlers), tuple(skipped), tuple(read))


def forget_read_files() -> None:
    """Forget the settings files read so far (tests rewrite one under the same name)."""
    with _lock:
        _read.clear()
