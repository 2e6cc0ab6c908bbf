"""Recovery of the browser task (WEB-2/3, PLG-2) and its close.

After a crash, :func:`comal.ops.reconcile` — before any model call — hands the intent an
orphan ``ChromePublish`` or ``ChromeDeploy`` recorded to its adapter here, which observes the
target afresh. These reads are the only thing recovery does, so a crash during them repeats
them and nothing else: no publish, no deploy, no click or fill (those have no adapter and stay
``uncertain``). ``ChromeRecover`` makes the same reads on request, for the model or a human.

A publish whose target shows the intended identity is ``postcondition_observed``; one whose
target still shows the identity recorded before is ``not_applied`` (its publish is conditional
on that identity, so running it again cannot apply twice); anything else — a different
identity, no answer — stays ``uncertain``, and a later ``ChromePublish`` to that target is
refused unless a human approves it (:func:`blocked_publish`).

``ChromeFinish`` runs the task's tests; ``finish_call`` is refused while a change the browser
made (a click, fill, deploy or publish) has no passing ``ChromeFinish`` after it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ..ledger import LedgerBackend, Scope
from ..messages import ToolCall
from ..ops import (
    CallContext,
    Effect,
    FinishGate,
    Observed,
    Operation,
    Receipt,
    RecoveryContext,
    ToolOutput,
)
from ..ops import receipts as receipts_of
from ..work import WorkHost
from ._deploy import observe_deploy
from ._errors import TargetError
from ._settings import settings_of
from ._targets import target_from_intent

__all__ = [
    "TESTS_EVENT",
    "blocked_publish",
    "finish_gate",
    "finish_operation",
    "last_opened",
    "published_here",
    "recover_deploy",
    "recover_operation",
    "recover_publish",
]

TESTS_EVENT = "chrome_tests"
_CHANGES = frozenset({"ChromeClick", "ChromeFill", "ChromeDeploy", "ChromePublish"})
_NOT_CLAIMED = "It does not say the original handler returned, nor who produced what it shows."


def last_opened(ledger: LedgerBackend, scope: Scope) -> tuple[str, int] | None:
    for r in reversed(receipts_of(ledger, scope)):
        if r.operation == "ChromeOpen" and r.status == "ok":
            url = r.observations.get("final_url") or r.observations.get("url")
            if isinstance(url, str) and r.record_id is not None:
                return url, r.record_id
    return None


def _target_of(observations: Mapping[str, Any]) -> Any:
    intent = observations.get("intent")
    return intent.get("target") if isinstance(intent, Mapping) else observations.get("target")


def blocked_publish(ledger: LedgerBackend, scope: Scope, target: Mapping[str, Any]) -> str | None:
    """Why the latest publish to ``target`` blocks a new one, or ``None``."""
    for r in reversed(receipts_of(ledger, scope)):
        if r.operation != "ChromePublish" or _target_of(r.observations) != dict(target):
            continue
        if r.status == "uncertain":
            return f"receipt {r.record_id}: {r.observations.get('reason', 'uncertain')}"
        if r.status in ("ok", "postcondition_observed"):
            return None
    return None


def published_here(
    ledger: LedgerBackend, scope: Scope, target: Mapping[str, Any], digest: str
) -> Receipt | None:
    """This session's latest publish to ``target`` that landed (``ok``, or observed after an
    interruption), when it published ``digest``; ``None`` when the latest that landed was
    another artifact, or a later one is unresolved."""
    for r in reversed(receipts_of(ledger, scope)):
        if r.operation != "ChromePublish" or _target_of(r.observations) != dict(target):
            continue
        if r.status == "uncertain":
            return None
        if r.status in ("ok", "postcondition_observed"):
            intent = r.observations.get("intent")
            done = intent.get("digest") if isinstance(intent, Mapping) else None
            return r if (r.observations.get("digest") or done) == digest else None
    return None


def _publish_reads(intent: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(match | before | other, what was read): one read of the target."""
    target = target_from_intent(dict(intent["target"]))
    seen = target.observe()
    read = {"read": "observe", "target": intent["target"], **seen.as_dict()}
    if seen.identity == intent["expected"]:
        return "match", read
    if seen.identity == intent["before"]["identity"]:
        return "before", read
    return "other", read


def recover_publish(intent: Mapping[str, Any], ctx: RecoveryContext) -> Observed:
    where = f"{intent['target']}"
    try:
        verdict, read = _publish_reads(intent)
    except TargetError as exc:
        why = f"the target did not answer: {exc}"
        return Observed("uncertain", {"reads": [], "reason": why}, _blocked_text(why))
    seen = {"reads": [read], "identity": read["identity"], "expected": intent["expected"]}
    if verdict == "match":
        text = (
            f"[postcondition_observed after an interruption: the publish target {where} shows "
            f"the intended identity {intent['expected']} (artifact {intent['digest']}). "
            f"{_NOT_CLAIMED}]"
        )
        return Observed("postcondition_observed", seen | {"postcondition": True}, text)
    if verdict == "before":
        why = (
            "the target still shows the identity from before the publish: it did not land; it "
            "is judged again (its publish is conditional on that identity, so it cannot apply "
            "twice)"
        )
        return Observed("not_applied", seen | {"postcondition": False, "reason": why})
    why = (
        f"the target shows {read['identity']}, neither the intended {intent['expected']} nor "
        f"the one from before: another publisher may have got there first"
    )
    return Observed("uncertain", seen | {"postcondition": False, "reason": why}, _blocked_text(why))


def _blocked_text(why: str) -> str:
    return (
        f"[uncertain after an interruption: ChromePublish — {why}. The publish stays blocked: "
        "you cannot publish to this target again; a human can (by approving a new publish). "
        "Tell the user what you observed; ChromeRecover reads the target again]"
    )


def recover_deploy(intent: Mapping[str, Any], ctx: RecoveryContext) -> Observed:
    url = str(intent["target"]["url"])
    try:
        now = observe_deploy(url)
    except TargetError as exc:
        return Observed("uncertain", {"reads": [], "reason": f"the target did not answer: {exc}"})
    seen = {"reads": [{"read": "deploy", "url": url, "digest": now}], "observed": now}
    if now == intent["digest"]:
        return Observed("postcondition_observed", seen | {"postcondition": True})
    if now == intent["before"]:
        why = "the target still serves the release from before: the deploy did not land"
        return Observed("not_applied", seen | {"postcondition": False, "reason": why})
    why = f"the target serves {now!r}, neither the intended release nor the one from before"
    return Observed("uncertain", seen | {"postcondition": False, "reason": why})


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _recover(args: _NoArgs, ctx: CallContext) -> ToolOutput:
    """The known reads: every intent a deploy or publish of this session recorded."""
    lines: list[str] = []
    reads: list[dict[str, Any]] = []
    for prep in ctx.ledger.records(ctx.scope, "preparation"):
        intent = prep.body.get("intent")
        op = prep.body.get("operation")
        if not isinstance(intent, dict) or op not in ("ChromePublish", "ChromeDeploy"):
            continue
        try:
            if op == "ChromePublish":
                verdict, read = _publish_reads(intent)
            else:
                now = observe_deploy(str(intent["target"]["url"]))
                verdict = "match" if now == intent["digest"] else "other"
                read = {"read": "deploy", "url": intent["target"]["url"], "digest": now}
        except TargetError as exc:
            verdict, read = "no answer", {"error": str(exc)}
        reads.append({"preparation": prep.id, "operation": op, "verdict": verdict} | read)
        lines.append(f"{op} (preparation {prep.id}): {verdict} {read}")
    text = "\n".join(lines) or "no deploy or publish intent in this session: nothing to read"
    return ToolOutput(text, observations={"reads": reads})


def recover_operation() -> Operation:
    return Operation(
        "ChromeRecover",
        "Read again, without changing anything, what this session's deploys and publishes "
        "meant to do: each target's identity now against the recorded intent.",
        _NoArgs,
        _recover,
        effects=(Effect("read"),),
    )


def _blocked_targets(ledger: LedgerBackend, scope: Scope) -> list[str]:
    targets: list[dict[str, Any]] = []
    for r in receipts_of(ledger, scope):
        target = _target_of(r.observations)
        if r.operation == "ChromePublish" and isinstance(target, dict) and target not in targets:
            targets.append(target)
    return [why for t in targets if (why := blocked_publish(ledger, scope, t)) is not None]


def finish_gate(ledger: LedgerBackend, scope: Scope) -> str | None:
    blocked = _blocked_targets(ledger, scope)
    if blocked:
        # A publish nobody can account for is not a finished task; a human resolves it.
        return f"a publish is blocked ({blocked[0]}); a human must resolve it first"
    last_change = max(
        (
            r.record_id or 0
            for r in receipts_of(ledger, scope)
            if r.operation in _CHANGES and r.status != "denied"
        ),
        default=0,
    )
    if not last_change:
        return None
    passed = [
        e.id
        for e in ledger.records(scope, "event", kinds=[TESTS_EVENT])
        if e.body.get("passed") is True
    ]
    if passed and max(passed) > last_change:
        return None
    return (
        "the browser task changed things (receipt "
        f"{last_change}) and its tests have not passed since: call ChromeFinish"
    )


class FinishArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    checks: list[Annotated[str, Field(min_length=1, max_length=2_000)]] = Field(
        default_factory=list,
        max_length=20,
        description="Commands the task names as its own tests (run as your shell calls, judged "
        "like them), after the operator's.",
    )


def _task_checks(args: FinishArgs, ctx: CallContext) -> list[dict[str, Any]]:
    """The task's own checks: the model's commands, judged for its actor under the session's
    policy (a deny rule, the sandbox), receipted apart."""
    assert ctx.factory is not None
    house = ctx.factory.house(ctx.scope)
    out: list[dict[str, Any]] = []
    for i, command in enumerate(args.checks):
        args_text = json.dumps({"command": command})
        call = ToolCall(f"check-{ctx.call_id}-task-{i}", "Bash", args_text)
        outcome = house.run(call, ctx.actor, surface="model")
        receipt = house.record(outcome, append_result=False)
        out.append({"command": command, "status": receipt.status, "receipt": receipt.record_id,
                    "output": outcome.result.text})  # fmt: skip
    return out


def _finish(args: FinishArgs, ctx: CallContext) -> ToolOutput:
    from ..agent import run_checks  # the checks' one runner, as finish_call's

    st = settings_of(ctx)
    assert ctx.factory is not None
    checks = run_checks(ctx.factory.house(ctx.scope), tuple(st.tests), ctx.call_id)
    ran: list[dict[str, Any]] = [
        {"command": c.command, "status": c.status, "receipt": c.receipt, "output": c.output}
        for c in checks
    ]
    ran += _task_checks(args, ctx)
    lines = [f"test `{c['command']}`: {c['status']}" for c in ran]
    passed = all(c["status"] == "ok" for c in ran)
    listed = [{k: c[k] for k in ("command", "status", "receipt")} for c in ran]
    body = {"v": 1, "call_id": ctx.call_id, "passed": passed, "tests": listed}
    ctx.ledger.add_record(ctx.scope, "event", TESTS_EVENT, body)
    if not passed:
        failed = next(c for c in ran if c["status"] != "ok")
        lines += [
            "[ChromeFinish] NOT finished: the task's tests failed",
            str(failed["output"])[-2000:],
        ]
        return ToolOutput("\n".join(lines), is_error=True, observations={"tests": listed})
    host = ctx.host
    agent = host.work_agent(ctx.scope) if isinstance(host, WorkHost) else None
    if agent is None:
        lines.append("the task's tests passed (no agent runs this session: nothing closed)")
        return ToolOutput("\n".join(lines), observations={"tests": listed})
    closed = agent.finish_call(ctx)
    text = "\n".join([*lines, closed.text])
    seen = {"tests": listed} | dict(closed.observations)
    return ToolOutput(text, is_error=closed.is_error, observations=seen)


def finish_operation(gate: FinishGate) -> Operation:
    return Operation(
        "ChromeFinish",
        "Close the browser task: runs the task's tests (the operator's, then the checks you "
        "name), then finish_call's checks; the task is finished only when all pass. Call it "
        "alone, with your final answer in the same reply.",
        FinishArgs,
        _finish,
        effects=(Effect("read"),),
        surfaces=frozenset({"model", "api"}),
        finish_gate=gate,
        closes=True,
    )
