"""A web session's inbox in the ledger: requests for the worker that runs the session.

Only the worker holding a session's lock runs its agent (:mod:`._web_owner`). A person's
request that needs that agent — an interrupt, a control (``/mode``, ``/model``, ``/effort``)
while it works, an "always" approval — may reach another worker, or another ``comal serve`` on
the same ledger. That one records it here as a ``web_command`` event (the operation, its
arguments and the actor the receiving server authenticated); the holder of the lock takes it,
runs it as the same human operation, and records the outcome as a ``web_command_state``
event, which the receiving worker reads back and answers with.

Each command is answered at most once: taking it and cancelling it (the asker gave up) are each
one transaction serialized per session (``ledger.exclusive``) that writes only if the command
has no state yet, so a command is either taken and run, or cancelled and never run — not both,
and never by two holders.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from ..ledger import LedgerBackend, Scope
from ..ops import Actor

__all__ = [
    "COMMAND_EVENT",
    "STATE_EVENT",
    "Command",
    "ask",
    "cancel",
    "commands",
    "finish",
    "state_of",
    "take",
]

COMMAND_EVENT = "web_command"
STATE_EVENT = "web_command_state"
State = Literal["taken", "done", "cancelled"]


@dataclass(frozen=True, slots=True)
class Command:
    id: str
    name: str
    args: dict[str, Any]
    by: Actor
    record: int


def ask(
    ledger: LedgerBackend, scope: Scope, name: str, args: dict[str, Any], by: Actor, asker: str
) -> str:
    """Leave a request for the session's runner; its id."""
    command = uuid.uuid4().hex
    body = {"v": 1, "id": command, "name": name, "args": args, "by": by.as_dict(), "from": asker}
    ledger.add_record(scope, "event", COMMAND_EVENT, body)
    return command


def commands(ledger: LedgerBackend, scope: Scope, *, after: int = 0) -> list[Command]:
    """The session's requests recorded after record ``after`` that have no state yet."""
    found = ledger.records(scope, "event", kinds=(COMMAND_EVENT,), since_id=after or None)
    if not found:
        return []
    done = {r.body.get("id") for r in ledger.records(scope, "event", kinds=(STATE_EVENT,))}
    return [
        Command(r.body["id"], r.body["name"], dict(r.body["args"]), _by(r.body["by"]), r.id)
        for r in found
        if r.body.get("id") not in done
    ]


def _by(raw: Any) -> Actor:
    return Actor.from_dict(dict(raw))


def state_of(ledger: LedgerBackend, scope: Scope, command: str) -> dict[str, Any] | None:
    """The command's latest state (``taken``, ``done`` with its ``answer``, ``cancelled``)."""
    latest = None
    for record in ledger.records(scope, "event", kinds=(STATE_EVENT,)):
        if record.body.get("id") == command:
            latest = record.body
    return latest


def _first_state(ledger: LedgerBackend, scope: Scope, command: str, state: State, by: str) -> bool:
    """Record ``state`` if the command has none yet (one transaction, serialized per session)."""
    with ledger.atomic():
        ledger.exclusive(f"web_command\x00{scope.session}")
        if state_of(ledger, scope, command) is not None:
            return False
        body = {"v": 1, "id": command, "state": state, "by": by}
        ledger.add_record(scope, "event", STATE_EVENT, body)
    return True


def take(ledger: LedgerBackend, scope: Scope, command: str, by: str) -> bool:
    """The runner takes the command; False when it was taken or cancelled already."""
    return _first_state(ledger, scope, command, "taken", by)


def cancel(ledger: LedgerBackend, scope: Scope, command: str, by: str) -> bool:
    """The asker gives up; False when the runner took the command first (it runs)."""
    return _first_state(ledger, scope, command, "cancelled", by)


def finish(
    ledger: LedgerBackend, scope: Scope, command: str, answer: dict[str, Any], by: str
) -> None:
    """The runner's answer to a command it took: an outcome, or ``{"error": {code, ...}}``."""
    body = {"v": 1, "id": command, "state": "done", "by": by, "answer": answer}
    ledger.add_record(scope, "event", STATE_EVENT, body)
