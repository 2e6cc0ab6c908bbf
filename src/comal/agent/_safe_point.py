"""What the loop does between two steps for the person watching it: deliver the messages they
sent while it worked (:mod:`._queue`), and close a step an interruption cut (:mod:`._interrupt`).

A safe point is where the session's newest step has a result for every call: a message
appended anywhere else would split a call from its result. The agent delivers at its safe
points only, and only its own session's messages (a work step's sub-agent gets none: people
talk to the coordinator).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..ops import not_run
from ._interrupt import INTERRUPTED_EVENT, interrupted_message
from ._lifecycle import PromptBlocked
from ._queue import Queued, QueueMode, claim, pending, record_delivered

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["OnDelivered", "SafePoint"]

OnDelivered = Callable[[Queued], None]


class SafePoint:
    """One agent's deliveries and interruptions."""

    def __init__(self, agent: Agent, on_delivered: OnDelivered | None = None) -> None:
        self.agent = agent
        self.on_delivered = on_delivered

    def deliver(self, modes: tuple[QueueMode, ...]) -> bool:
        """Append the pending messages sent ``modes`` way, oldest first, if this is a safe
        point; whether any went in."""
        a = self.agent
        if a.actor.kind == "subagent":
            return False
        found = [q for q in pending(a.ledger, a.scope) if q.mode in modes]
        if not found or a.open_calls():
            return False
        delivered = False
        for queued in found:
            delivered = self._one(queued) or delivered
        return delivered

    def _one(self, queued: Queued) -> bool:
        a = self.agent
        try:
            added = a.hooks.prompt(queued.prompt)
        except PromptBlocked as exc:
            with a.ledger.atomic():
                if claim(a.ledger, a.scope, queued):
                    why = {"blocked": exc.code, "reason": str(exc)}
                    record_delivered(a.ledger, a.scope, queued, seq=None, run=a.run_id, **why)
            a.say("warn", str(exc))
            return False
        said = a.said(queued.prompt, queued.by.id, queued.channel)
        with a.ledger.atomic():  # the message and its mark, or neither: exactly once
            if not claim(a.ledger, a.scope, queued):
                return False
            seq = None
            for message in (said, *added):
                entry = a.ledger.append(a.scope, [message])[0]
                seq = entry.seq if seq is None else seq
            record_delivered(a.ledger, a.scope, queued, seq=seq, run=a.run_id)
        how = "steering message" if queued.mode == "steer" else "queued message"
        a.say("note", f"the {how} from {queued.by.id} went in")
        if self.on_delivered is not None:
            self.on_delivered(queued)
        return True

    def interrupted(self, by: str, where: str) -> None:
        """Close the step the interruption cut: its calls that never started get a result
        saying so (receipt ``interrupted``, disposition ``repeat``), and the session a
        message telling the model the person stopped the run; an ``interrupted`` event."""
        a = self.agent
        step, calls = a.open_step()
        for call in calls:
            why = f"{by} interrupted the run before it started"
            a.house.record(not_run(a.house.registry, call, a.actor, "model", why), join_step=step)
            a.say("result", f"{call.name}: not run (interrupted)")
        body = {"v": 1, "run": a.run_id, "by": by, "where": where, "not_run": [c.id for c in calls]}
        with a.ledger.atomic():
            a.ledger.append(a.scope, [interrupted_message(by, where)])
            a.ledger.add_record(a.scope, "event", INTERRUPTED_EVENT, body)
