"""Helpers of the security regression suite (issue 9): tallies of hostile calls, a racer,
a hang guard."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _ops_support import ANA, Setup, call
from comal.messages import Message
from comal.ops import Outcome, Receipt


@dataclass
class Tally:
    """What a run of hostile calls left: receipts, exceptions out of the house, outcomes."""

    calls: int = 0
    receipts: int = 0
    escaped: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)

    def note(self, receipt: Receipt) -> None:
        self.receipts += 1
        self.statuses[receipt.status] = self.statuses.get(receipt.status, 0) + 1
        code = str(receipt.observations.get("error") or receipt.judgment.get("rule"))
        self.codes[code] = self.codes.get(code, 0) + 1


def attempt(s: Setup, tally: Tally, name: str, args: dict[str, object]) -> Outcome | None:
    """Propose one call the model's way; an exception out of the house is recorded, not
    raised, so a race run counts every one of them."""
    tally.calls += 1
    c = call(name, args)
    try:
        step = s.ledger.append(s.scope, [Message.assistant("", c)])[0].step
        outcome, receipt = s.house.handle(c, ANA, join_step=step)
    except Exception as exc:  # the very thing under test: nothing may get out
        tally.escaped.append(f"{type(exc).__name__}: {exc}")
        return None
    tally.note(receipt)
    return outcome


class Racer:
    """A thread that runs ``step`` in a loop until stopped; its own errors are ignored (it
    fights the house for the same names)."""

    def __init__(self, step: Callable[[], None]) -> None:
        self._step = step
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.rounds = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except OSError:
                pass
            self.rounds += 1

    def __enter__(self) -> Racer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def swap_dir_for_symlink(directory: Path, target: Path) -> Callable[[], None]:
    """One round: ``directory`` becomes a symlink to ``target``, then the directory again."""
    hidden = directory.with_name(directory.name + ".real")

    def step() -> None:
        os.rename(directory, hidden)
        try:
            os.symlink(target, directory)
            time.sleep(0.0005)  # hold each state long enough for a call to meet it
            os.unlink(directory)
        finally:
            os.rename(hidden, directory)
        time.sleep(0.0005)

    return step


def finishes(fn: Callable[[], object], seconds: float = 60.0) -> bool:
    """Run ``fn`` in a thread; False if it is still blocked after ``seconds`` (a hang guard,
    not a speed assertion)."""
    done = threading.Event()

    def run() -> None:
        try:
            fn()
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(seconds)
