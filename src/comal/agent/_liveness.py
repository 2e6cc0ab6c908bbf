"""Whether a session is alive, said the same way on every surface (``comal sessions``, the
TUI's ``/resume``, the web page's sidebar and header, the HTTP API).

The ledger stores only ``active`` or ``finished``; what a person needs is derived:

- ``finished``: the session closed (its checks passed, or ``finish_call``);
- ``active``: a live process holds the session's lock now (a run, or a web worker serving it);
- ``interrupted``: no process holds it, its task is mid-way (a prompt unanswered, calls without
  results, results the model has not read), and the last run ended on purpose (a person's
  interrupt, ``max_turns``, the budget, an error it reported): a prompt continues it;
- ``crashed``: mid-way too, but no run recorded its end after the last step (the process
  died): ``--resume`` recovers it;
- ``idle``: nothing is mid-way; it waits for a person's next prompt. A proxied or
  framework-driven session (its client owns the loop) is ``idle`` whenever no lock is held.

Each run of the agent records its end (``run_ended``, with its status and error code, in the
ledger): that is how ``interrupted`` and ``crashed`` are told apart.
"""

from __future__ import annotations

from typing import Final, Literal

from ..ledger import LedgerBackend, Record, SessionInfo
from ..messages import Role

__all__ = ["LIVENESS", "RUN_ENDED", "Liveness", "liveness", "run_ended_body"]

Liveness = Literal["active", "idle", "interrupted", "crashed", "finished"]
LIVENESS: Final = ("active", "idle", "interrupted", "crashed", "finished")
RUN_ENDED: Final = "run_ended"
# Sessions whose loop lives in a client (the proxy's, a framework's): no run of comal's ends.
_CLIENT_LOOPS: Final = ("proxy", "integration:")


def run_ended_body(status: str, error_code: str | None, at_seq: int) -> dict[str, object]:
    return {"v": 1, "status": status, "error": error_code, "at_seq": at_seq}


def _mid_task(ledger: LedgerBackend, info: SessionInfo) -> tuple[bool, int]:
    """Whether the session's task is mid-way, and the seq its next entry takes."""
    tail = ledger.tail(info.scope, n=1)
    if not tail:
        return False, 0
    last = tail[-1]
    waiting = last.role in (Role.USER.value, Role.TOOL.value) or bool(last.message.tool_calls)
    return waiting, last.seq + 1


def liveness(ledger: LedgerBackend, info: SessionInfo) -> Liveness:
    """``info``'s session as the module docstring says it."""
    if info.status == "finished":
        return "finished"
    if ledger.session_lock_holder(info.scope) is not None:
        return "active"
    if (info.source or "").startswith(_CLIENT_LOOPS):
        return "idle"
    waiting, next_seq = _mid_task(ledger, info)
    if not waiting:
        return "idle"
    ends: list[Record] = ledger.records(info.scope, "event", kinds=(RUN_ENDED,))
    last_end = ends[-1].body if ends else None
    if last_end is not None and int(last_end.get("at_seq", -1)) >= next_seq:
        return "interrupted"
    return "crashed"
