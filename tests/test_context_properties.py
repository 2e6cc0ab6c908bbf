"""Property tests of the default engine over generated sessions at 4k, 16k and 45k windows.

Each example runs a live session step by step against a real SQLite ledger, storing every
proposed checkpoint, and checks every assembly (see ``_context_sessions.check_turn``).
"""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings

from _context_sessions import (
    StepSpec,
    budget,
    check_sticky,
    check_turn,
    config,
    new_ledger,
    run,
    sessions,
)

_SETTINGS = settings(
    max_examples=int(os.environ.get("COMAL_CONTEXT_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _check_run(tmp_path: Path, window: int, specs: list[StepSpec], keep: int = 5) -> None:
    ledger, scope = new_ledger(tmp_path / f"{uuid.uuid4().hex}.db")
    bud, cfg = budget(window), config(keep_recent_results=keep)
    try:
        turns, error = run(ledger, scope, specs, bud, cfg)
        if error is not None:
            # A coded error is the only other outcome allowed (LIM-5); turns before it count.
            assert error.code == "CONTEXT_PRESSURE_LOOP" and "ledger" in str(error)
            event("outcome: CONTEXT_PRESSURE_LOOP")
        for turn in turns:
            event(f"stage: {turn.assembly.breakdown['stage']}")
            check_turn(ledger, scope, turn, bud, cfg)
        for prev, cur in itertools.pairwise(turns):
            check_sticky(prev, cur)
    finally:
        ledger.close()


@_SETTINGS
@given(specs=sessions(4_000))
def test_window_4k(tmp_path: Path, specs: list[StepSpec]) -> None:
    # covers: LIM-1, LIM-2, LIM-3, LIM-4, LIM-5, LIM-6, EVI-1, EVI-2, TOK-4, OBS-1
    # Two protected results: five outputs of up to half a 4k window cannot all stay verbatim.
    _check_run(tmp_path, 4_000, specs, keep=2)


@_SETTINGS
@given(specs=sessions(16_000))
def test_window_16k(tmp_path: Path, specs: list[StepSpec]) -> None:
    # covers: LIM-1, LIM-2, LIM-3, LIM-4, LIM-5, LIM-6, EVI-1, EVI-2, TOK-4, OBS-1
    _check_run(tmp_path, 16_000, specs)


@_SETTINGS
@given(specs=sessions(45_000))
def test_window_45k(tmp_path: Path, specs: list[StepSpec]) -> None:
    # covers: LIM-1, LIM-2, LIM-3, LIM-4, LIM-5, LIM-6, EVI-1, EVI-2, TOK-3, TOK-4, OBS-1
    _check_run(tmp_path, 45_000, specs)
