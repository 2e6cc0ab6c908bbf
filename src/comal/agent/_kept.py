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

from collections.abc import Mapping
from typing import Any

from ..ledger import LedgerBackend, Scope, SessionInfo

__all__ = ["KEPT", "SETTINGS_EVENT", "changes", "kept_settings", "served_by", "settings_event"]

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
