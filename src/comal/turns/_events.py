"""OBS-2: the engine's significant actions, recorded as ledger events when they first happen.

Engines are pure and say what they did in every assembly (:class:`~comal.context.Action`
values); most of it is sticky (a reference stays a reference, turn after turn), so an event is
written only for what is new since the previous request: a reference or image note first
decided after it, a message first bounded after it, a checkpoint stored now. One event per kind
per request, naming its entries and the tokens it saved; ``comal events SESSION`` lists them.
"""

from __future__ import annotations

from typing import Any

from ..context import Action, Assembly, Bounded, Checkpointed, MediaReferenced, Referenced

__all__ = ["EVENT_KINDS", "action_kind", "assembly_events", "is_new"]

# Kinds written by the limit engine's actions; other engines' actions use their class name.
EVENT_KINDS = {
    Referenced: "referenced",
    MediaReferenced: "media_referenced",
    Bounded: "bounded",
    Checkpointed: "checkpointed",
}


def action_kind(action: Action) -> str:
    return EVENT_KINDS.get(type(action), type(action).__name__.lower())


def is_new(action: Action, since: int) -> bool:
    """Whether ``action`` happened after seq ``since`` (the previous request's last entry)."""
    if isinstance(action, Checkpointed):
        return True  # only the assembly that proposes a checkpoint carries this action
    flagged = getattr(action, "new", None)
    if isinstance(flagged, bool):
        return flagged  # the engine says itself whether it did this now (pipeline)
    if isinstance(flagged, int):
        return flagged > 0  # a layer's report counts what it did now; none is not news
    decided = getattr(action, "decided_at", None)
    if isinstance(decided, int) and decided >= 0:
        return decided > since
    seq = getattr(action, "seq", None)
    return not isinstance(seq, int) or seq > since


def assembly_events(assembly: Assembly, since: int, *, at_seq: int) -> list[dict[str, Any]]:
    """The event bodies to record for ``assembly``: ``kind``, ``at_seq`` (the request's point),
    ``count``, ``tokens_saved`` and the ``entries`` (or seq range) each kind touched."""
    grouped: dict[str, list[Action]] = {}
    for action in assembly.actions:
        if is_new(action, since):
            grouped.setdefault(action_kind(action), []).append(action)
    events = []
    for kind, actions in grouped.items():
        saved = sum(
            int(getattr(a, "tokens_before", 0)) - int(getattr(a, "tokens_after", 0))
            for a in actions
        )
        body: dict[str, Any] = {"v": 1, "kind": kind, "at_seq": at_seq, "count": len(actions)}
        body["tokens_saved"] = saved
        ids = [getattr(a, "entry_id", None) for a in actions]
        entries = [i for i in ids if isinstance(i, int)]
        if entries:
            body["entries"] = entries
        for a in actions:
            if isinstance(a, Checkpointed):
                body["first_seq"], body["last_seq"] = a.first_seq, a.last_seq
        events.append(body)
    return events
