"""Messages a person sends while the agent works: queued in the ledger, delivered once (DRV-3).

Codex's two keys, on every surface alike (the TUI, the web page, the ``prompt`` operation):

- **steer** (Enter while it works): the message goes in at the run's next safe point — once
  every call of the current step has its result, before the next model call (or instead of
  ending the run, when the model has just answered);
- **queue** (Tab while it works): the message waits for the run to finish (the model answered
  and ``finish_call`` passed), then starts the next turn of the same run.

Either is a ``prompt_queued`` event of the session first (who sent it, through which surface,
which way), so a crash loses nothing and any process may take it: whichever holds the
session's lock and runs its agent delivers it (a web worker, another ``comal serve`` on the
same ledger, the TUI, ``comal -p``). Delivery appends the message as the person's prompt (its
preamble names them and the surface) and records ``prompt_delivered`` in the same transaction,
so it happens exactly once; until then every surface shows it as queued (:func:`pending`).

A run that starts (a prompt, a resume) delivers what is still queued first, oldest first,
before its own prompt. When a person interrupts a run while messages of theirs wait, the step
it cut is closed and they go in at once: the run goes on with them (Codex's Escape: "interrupt
and send now"); without any, the run stops. A host whose run ended while a message came in
starts another for it (:func:`pending` says whether one waits).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from ..ledger import LedgerBackend, Scope
from ..ops import Actor

__all__ = [
    "DELIVERED_EVENT",
    "QUEUED_EVENT",
    "QueueMode",
    "Queued",
    "claim",
    "enqueue",
    "pending",
    "record_delivered",
]

QUEUED_EVENT = "prompt_queued"
DELIVERED_EVENT = "prompt_delivered"
QueueMode = Literal["steer", "queue"]
MODES: tuple[QueueMode, ...] = ("steer", "queue")


@dataclass(frozen=True, slots=True)
class Queued:
    """A message sent while the agent worked, not delivered yet."""

    id: str
    prompt: str
    mode: QueueMode
    by: Actor
    channel: str | None
    record: int
    at: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "prompt": self.prompt,
            "mode": self.mode,
            "by": self.by.as_dict(),
            "channel": self.channel,
            "record": self.record,
            "at": self.at,
        }


def enqueue(
    ledger: LedgerBackend,
    scope: Scope,
    prompt: str,
    *,
    mode: QueueMode = "steer",
    by: Actor,
    channel: str | None = None,
) -> Queued:
    """Record ``prompt`` for the session's running agent; it is delivered once."""
    if mode not in MODES:
        raise ValueError(f"a queued message is steer or queue, not {mode!r}")
    qid = uuid.uuid4().hex
    body = {"v": 1, "id": qid, "prompt": prompt, "mode": mode, "by": by.as_dict()}
    body["channel"] = channel
    record = ledger.add_record(scope, "event", QUEUED_EVENT, body)
    return Queued(qid, prompt, mode, by, channel, record.id, record.created_at)


def pending(ledger: LedgerBackend, scope: Scope) -> list[Queued]:
    """The session's queued messages not delivered yet, oldest first."""
    records = ledger.records(scope, "event", kinds=(QUEUED_EVENT, DELIVERED_EVENT))
    done = {r.body.get("id") for r in records if r.kind == DELIVERED_EVENT}
    out = []
    for r in records:
        body = r.body
        if r.kind != QUEUED_EVENT or body.get("id") in done:
            continue
        mode: QueueMode = "queue" if body.get("mode") == "queue" else "steer"
        by = Actor.from_dict(dict(body["by"]))
        channel = body.get("channel")
        out.append(
            Queued(
                str(body["id"]),
                str(body.get("prompt", "")),
                mode,
                by,
                str(channel) if channel else None,
                r.id,
                r.created_at,
            )
        )
    return out


def claim(ledger: LedgerBackend, scope: Scope, queued: Queued) -> bool:
    """Inside the caller's transaction: whether ``queued`` is still to deliver, every other
    deliverer of the session kept out until the transaction ends."""
    ledger.exclusive(f"prompt_queue\x00{scope.session}")
    return queued.id in {q.id for q in pending(ledger, scope)}


def record_delivered(
    ledger: LedgerBackend, scope: Scope, queued: Queued, *, seq: int | None, run: str, **more: Any
) -> None:
    """``queued`` went in at entry ``seq`` (``None``: it did not, ``more`` says why)."""
    body = {"v": 1, "id": queued.id, "seq": seq, "run": run, "mode": queued.mode} | more
    ledger.add_record(scope, "event", DELIVERED_EVENT, body)
