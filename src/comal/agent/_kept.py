"""What a session keeps across runs (DRV-4): its model, mode, effort and engine.

A session is started with them (its meta, written by :meth:`Runtime.start`); a later run that
takes others — a flag on ``--resume`` or ``-c``, ``/model`` or ``/mode`` in the TUI or on a
page — records a ``session_settings`` event when it starts, with the settings it runs with,
what changed and how many model requests the session had made by then. A resume without flags
takes the latest of them, never the configuration's defaults, which are for new sessions: a
session started ``--mode trusted`` and killed resumes trusted. The new process's rules, sandbox
and limits still apply (RES-6).

The request count lets a scripted model (``script:PATH``) count its own replies: a script that
becomes the model of a session at its 7th request answers that request with its first reply
(:func:`served_by`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..ledger import LedgerBackend, Scope, SessionInfo
from ..ops import MODES, Mode
from ._config import Config
from ._flags import Flags, model_from_keys, normalize_spec

__all__ = [
    "KEPT",
    "SETTINGS_EVENT",
    "Opening",
    "changes",
    "kept_notes",
    "kept_settings",
    "opening",
    "record_settings",
    "served_by",
    "settings_event",
]

SETTINGS_EVENT = "session_settings"
KEPT = ("model", "mode", "effort", "engine")


def kept_settings(ledger: LedgerBackend, info: SessionInfo) -> dict[str, Any]:
    """The session's settings as its runs recorded them: its meta, then each change, in order
    (a key it never recorded is absent: the configuration decides it)."""
    kept = {k: info.meta[k] for k in KEPT if k in info.meta}
    for record in ledger.records(info.scope, "event", kinds=(SETTINGS_EVENT,)):
        settings = record.body.get("settings")
        if isinstance(settings, Mapping):
            kept |= {k: settings[k] for k in KEPT if k in settings}
    return kept


def changes(kept: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, list[Any]]:
    """``{key: [before, after]}`` for each kept setting ``now`` differs in."""
    return {k: [kept.get(k), now.get(k)] for k in KEPT if k in now and kept.get(k) != now.get(k)}


def settings_event(
    now: Mapping[str, Any], changed: Mapping[str, list[Any]], by: Mapping[str, str], requests: int
) -> dict[str, Any]:
    """The ``session_settings`` body: the settings from now on, what changed and who changed
    it (``flag``: the command line; ``control``: /model, /mode, /effort), and the session's
    model requests so far."""
    return {
        "v": 1,
        "settings": dict(now),
        "changed": dict(changed),
        "by": dict(by),
        "requests": requests,
    }


@dataclass(frozen=True, slots=True)
class Opening:
    """What a run of a session starts with: the model spec, the mode and effort, the engine
    the session keeps (``None``: the configuration's), and what to say about them once."""

    spec: str | None
    mode: Mode
    effort: str | None
    engine: str | None
    notes: tuple[str, ...] = ()


def opening(
    ledger: LedgerBackend,
    config: Config,
    flags: Flags,
    previous: SessionInfo | None,
    *,
    need_model: bool,
) -> Opening:
    """The settings a run takes: a flag's, else the session's (DRV-4), else the
    configuration's; a new session with no model named anywhere takes one from the provider
    keys present, said once."""
    kept = kept_settings(ledger, previous) if previous is not None else {}
    notes: list[str] = []
    spec = flags.model or kept.get("model") or config.model
    if spec:
        spec = normalize_spec(str(spec))
    elif need_model:
        chosen = model_from_keys(os.environ)
        if chosen is None:
            raise UserError(
                "no model: pass --model provider:model (e.g. anthropic:claude-sonnet-4-6, or "
                "script:PATH), set COMAL_MODEL, set model in the configuration file, or set "
                "ANTHROPIC_API_KEY or OPENAI_API_KEY to use a default model"
            )
        spec, why = chosen
        notes.append(why)
    mode: Mode = config.mode
    kept_mode = kept.get("mode")
    if not flags.mode and kept_mode in MODES:
        mode = next(m for m in MODES if m == kept_mode)
    effort = config.effort
    if not flags.effort and "effort" in kept:
        effort = str(kept["effort"]) if kept["effort"] else None
    engine = str(kept["engine"]) if not flags.engine and kept.get("engine") else None
    if previous is not None and kept:
        now = {"mode": mode, "effort": effort}
        now["engine"] = engine or config.engine_name(previous.agent)
        notes += kept_notes(kept, now, flags)
    return Opening(spec or None, mode, effort, engine, tuple(notes))


def kept_notes(kept: Mapping[str, Any], now: Mapping[str, Any], flags: object) -> list[str]:
    """What a resumed session keeps, and what a flag (an attribute of ``flags`` named as the
    setting) changes in it: said once when the run starts."""
    held = [f"{k} {v}" for k, v in now.items() if v and k in kept and kept[k] == v]
    notes = []
    if held:
        notes.append(
            f"resumed with the session's {', '.join(held)} (--mode, --effort, --engine change them)"
        )
    for key, (before, after) in changes(kept, now).items():
        if getattr(flags, key, None):
            notes.append(f"--{key} {after} replaces the session's {key} {before} (recorded)")
    return notes


def record_settings(
    ledger: LedgerBackend,
    scope: Scope,
    now: Mapping[str, Any],
    flags: object,
    say: Callable[[str, str], None] | None = None,
) -> None:
    """Record ``now`` as the session's settings when they differ from what it recorded, who
    changed each (a flag, or a control such as /mode), and say it."""
    info = ledger.session(scope)
    if info is None:
        return
    changed = changes(kept_settings(ledger, info), now)
    if not changed:
        return
    by = {k: "flag" if getattr(flags, k, None) else "control" for k in changed}
    made = int(ledger.usage_totals(scope)["requests"] or 0)
    ledger.add_record(scope, "event", SETTINGS_EVENT, settings_event(now, changed, by, made))
    if say is not None:
        said = ", ".join(f"{k} {b} ({by[k]})" for k, (_, b) in changed.items())
        say("note", f"the session now runs with {said}: recorded, a resume keeps it")


def served_by(ledger: LedgerBackend, scope: Scope, spec: str) -> int | None:
    """How many of the session's model requests ``spec`` answered: the requests made while it
    was the session's model, by the recorded changes. ``None`` when the session never recorded
    ``spec`` as its model (then every request counts, as before any change was recorded)."""
    info = ledger.session(scope)
    if info is None:
        return None
    spans: list[tuple[Any, int]] = [(info.meta.get("model"), 0)]
    for record in ledger.records(scope, "event", kinds=(SETTINGS_EVENT,)):
        body = record.body
        changed = body.get("changed")
        settings = body.get("settings")
        if isinstance(changed, Mapping) and "model" in changed and isinstance(settings, Mapping):
            spans.append((settings.get("model"), int(body.get("requests") or 0)))
    if not any(model == spec for model, _ in spans):
        return None
    total = int(ledger.usage_totals(scope)["requests"] or 0)
    ends = [start for _, start in spans[1:]] + [total]
    return sum(
        max(0, end - start)
        for (model, start), end in zip(spans, ends, strict=True)
        if model == spec
    )
