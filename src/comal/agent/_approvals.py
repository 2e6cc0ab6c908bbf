"""Approvals over the ledger: an agent's ``ask`` judgments answered from another process.

:class:`LedgerApprover` is an :class:`~comal.ops.Approver`: for each request it records an
``approval_request`` event in the session and waits until an ``approval_answer`` event names
it. Answers are written (:func:`answer`) by the ``approve`` operation on the ``api`` surface
(:mod:`._steering`), with the *authenticated* human as ``by`` (OPS-2: the actor comes from the
host — the proxy key's tenant or the local user — never from the request body or the model).
The agent and whoever answers share only the ledger, so the agent may run in another process
(``comal -p`` beside ``comal serve``) or in the server's own worker (the web interface).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import UserError
from ..ledger import LedgerBackend, Record, Scope
from ..ops import Actor, Approval, ApprovalRequest

__all__ = [
    "APPROVAL_ANSWER",
    "APPROVAL_REQUEST",
    "LedgerApprover",
    "answer",
    "pending",
]

APPROVAL_REQUEST = "approval_request"
APPROVAL_ANSWER = "approval_answer"


def _request_body(request: ApprovalRequest, request_id: str) -> dict[str, Any]:
    return {
        "v": 1,
        "id": request_id,
        "call_id": request.call_id,
        "operation": request.operation,
        "actor": request.actor.as_dict(),
        "surface": request.surface,
        "arguments": dict(request.arguments),
        "arguments_digest": request.arguments_digest,
        "rule": request.rule,
        "reason": request.reason,
        "effects": [e.as_dict() for e in request.effects],
        "describe": request.describe(),
        "change": request.change,
    }


class LedgerApprover:
    """Waits for an answer written to the ledger; ``timeout`` seconds without one refuse, and so
    does ``stop()`` turning true (an interrupt: nobody is left to wait for)."""

    def __init__(
        self,
        ledger: LedgerBackend,
        scope: Scope,
        *,
        poll: float = 0.1,
        timeout: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        stop: Callable[[], bool] | None = None,
        on_request: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.scope = scope
        self.poll = poll
        self.timeout = timeout
        self._sleep = sleep
        self._stop = stop
        self._on_request = on_request

    def approve(self, request: ApprovalRequest) -> Approval:
        request_id = uuid.uuid4().hex
        body = _request_body(request, request_id)
        self.ledger.add_record(self.scope, "event", APPROVAL_REQUEST, body)
        if self._on_request is not None:
            self._on_request(body)
        started = time.monotonic()
        while True:
            found = _answer_of(self.ledger, self.scope, request_id)
            if found is not None:
                body = found.body
                return Approval(bool(body["granted"]), Actor.from_dict(body["by"]), body["reason"])
            if self.timeout is not None and time.monotonic() - started > self.timeout:
                by = Actor.operator("comal")
                reason = f"no answer within {self.timeout:g} s"
                self._write(request_id, False, by, reason)
                return Approval(False, by, reason)
            if self._stop is not None and self._stop():
                by = Actor.operator("comal")
                reason = "interrupted before anyone answered"
                self._write(request_id, False, by, reason)
                return Approval(False, by, reason)
            self._sleep(self.poll)

    def _write(self, request_id: str, granted: bool, by: Actor, reason: str) -> None:
        body = {"v": 1, "request": request_id, "granted": granted, "by": by.as_dict()}
        self.ledger.add_record(self.scope, "event", APPROVAL_ANSWER, body | {"reason": reason})


def _answer_of(ledger: LedgerBackend, scope: Scope, request_id: str) -> Record | None:
    for record in ledger.records(scope, "event", kinds=(APPROVAL_ANSWER,)):
        if record.body.get("request") == request_id:
            return record
    return None


def pending(ledger: LedgerBackend, scope: Scope) -> list[dict[str, Any]]:
    """The session's approval requests that have no answer yet, oldest first."""
    records = ledger.records(scope, "event", kinds=(APPROVAL_REQUEST, APPROVAL_ANSWER))
    answered = {r.body.get("request") for r in records if r.kind == APPROVAL_ANSWER}
    return [
        {**r.body, "session": scope.session, "record": r.id, "created_at": r.created_at}
        for r in records
        if r.kind == APPROVAL_REQUEST and r.body.get("id") not in answered
    ]


def answer(
    ledger: LedgerBackend,
    scope: Scope,
    request_id: str,
    *,
    granted: bool,
    by: Actor,
    reason: str = "",
) -> dict[str, Any]:
    """Answer a pending request as ``by`` (a human the host authenticated)."""
    if not by.human:
        raise UserError(f"only a user or operator can answer an approval, not a {by.kind}")
    with ledger.atomic():
        if request_id not in {p["id"] for p in pending(ledger, scope)}:
            if _answer_of(ledger, scope, request_id) is not None:
                raise UserError(f"approval {request_id} was already answered")
            raise LookupError(request_id)
        body = {"v": 1, "request": request_id, "granted": granted, "by": by.as_dict()}
        body["reason"] = reason or ("approved" if granted else "refused")
        record = ledger.add_record(scope, "event", APPROVAL_ANSWER, body)
    return {**body, "record": record.id, "created_at": record.created_at}
