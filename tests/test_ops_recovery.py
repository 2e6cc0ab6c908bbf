"""Recovery adapters for operations with effects (PLG-2): the intent recorded in the durable
preparation, then a fresh observation after a crash decides the receipt."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from _ops_support import call, make_setup, propose
from comal.ops import (
    CallContext,
    Effect,
    Observed,
    Operation,
    RecoveryContext,
    Registry,
    ToolOutput,
    may_retry,
    receipts,
    reconcile,
)


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Crash(BaseException):
    """Stands for the process dying: nothing in the house catches it."""


WORLD: dict[str, Any] = {}


def _intent(args: NoArgs, ctx: CallContext) -> Mapping[str, Any]:
    return {"before": WORLD.get("value"), "expected": "new"}


def _push(args: NoArgs, ctx: CallContext) -> ToolOutput:
    assert ctx.intent == {"before": WORLD.get("value"), "expected": "new"}
    WORLD["value"] = "new"
    return ToolOutput("pushed")


def _observe(intent: Mapping[str, Any], ctx: RecoveryContext) -> Observed:
    if WORLD.get("error"):
        raise OSError("no answer")
    now = WORLD.get("value")
    if now == intent["expected"]:
        return Observed("postcondition_observed", {"now": now}, "[observed: it is there]")
    if now == intent["before"]:
        return Observed("not_applied", {"now": now, "reason": "still as before"})
    return Observed("uncertain", {"now": now, "reason": "someone else's value"})


def _registry(with_adapter: bool = True) -> Registry:
    return Registry(
        [
            Operation(
                "Push", "push", NoArgs, _push, effects=(Effect("publish"),), intent=_intent,
                recover=_observe if with_adapter else None,
            )
        ]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("landed", "meddle", "expected"),
    [
        (True, None, "postcondition_observed"),
        (False, None, "not_applied"),
        (False, "theirs", "uncertain"),
        (False, "error", "uncertain"),
    ],
)
def test_a_recovery_adapter_decides_an_orphan_call(
    tmp_path: Path, landed: bool, meddle: str | None, expected: str
) -> None:
    # covers: PLG-2, RES-4
    WORLD.clear()
    WORLD["value"] = "old"
    registry = _registry()
    at = "executed" if landed else "prepared"

    def probe(phase: str, call_id: str) -> None:
        if phase == at:
            raise Crash

    s = make_setup(tmp_path, registry=registry, probe=probe)
    try:
        c = call("Push", {}, "p1")
        with pytest.raises(Crash):
            propose(s, c)
        prep = s.ledger.records(s.scope, "preparation")[-1]
        assert prep.body["intent"] == {"before": "old", "expected": "new"}
        if meddle == "theirs":
            WORLD["value"] = "theirs"
        elif meddle == "error":
            WORLD["error"] = True
        report = reconcile(s.ledger, s.scope, registry=registry)
        assert report.status_of("p1") == expected
        (receipt,) = receipts(s.ledger, s.scope)
        assert receipt.status == expected
        if expected == "not_applied":
            assert report.pending == ("p1",)  # judged and run again
        elif expected == "uncertain":
            assert not may_retry(s.ledger, s.scope, "p1")
        else:
            assert receipt.disposition == "serve"
        # Twice is once.
        assert reconcile(s.ledger, s.scope, registry=registry).items == ()
    finally:
        s.close()


def test_without_an_adapter_a_started_call_stays_uncertain(tmp_path: Path) -> None:
    # covers: PLG-2
    WORLD.clear()
    registry = _registry(with_adapter=False)

    def probe(phase: str, call_id: str) -> None:
        if phase == "prepared":
            raise Crash

    s = make_setup(tmp_path, registry=registry, probe=probe)
    try:
        with pytest.raises(Crash):
            propose(s, call("Push", {}, "p2"))
        report = reconcile(s.ledger, s.scope, registry=registry)
        assert report.status_of("p2") == "uncertain"
        assert "no postcondition adapter" in report.items[0].reason
    finally:
        s.close()
