"""Tool calls and results as the providers require them, checked before anything is stored.

Every provider refuses a conversation whose tool calls and results do not pair up: a call must
be answered, by results that come right after its assistant message, before the conversation
goes on; a result must answer a call of the assistant message before it. The ledger's
``verify`` calls the same shapes faults (``split-step``: a new step while calls are open;
``orphan``). So the proxy refuses them with a 400 in the provider's shape before the request is
routed, and nothing of such a request reaches the ledger or the upstream.

A conversation may end in open calls (an assistant message whose calls the client has not
answered yet): the ledger stores that as a paused step, and the upstream decides.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..messages import Message, Opaque, Role, ToolCall
from ._errors import ToolPairsBroken

__all__ = ["check_pairs"]


def _opaque_call_ids(message: Message) -> set[str]:
    """Call ids of calls comal keeps opaque (a Responses ``local_shell_call``, say): the
    result that answers one is the client's own business, not an orphan."""
    found: set[str] = set()
    for part in message.parts:
        if isinstance(part, Opaque) and '"call_id"' in part.raw:
            value = json.loads(part.raw)
            if isinstance(value, dict) and isinstance(value.get("call_id"), str):
                found.add(value["call_id"])
    return found


def check_pairs(messages: Sequence[Message]) -> None:
    """Raise :class:`ToolPairsBroken` unless every call is answered before the conversation goes
    on and every result answers a call of the assistant message before it.

    The steps are those of :func:`~comal.messages.group_messages`, walked in one pass without
    building them: it runs on every request, over the whole resent history."""
    opaque_calls: set[str] = set()
    calls: tuple[ToolCall, ...] = ()  # the calls of the message that began the current step
    waiting: set[str] = set()  # those of them no result has answered yet
    answerable = False  # only an assistant message's calls are answered by the results after it
    for message in messages:
        result = message.tool_result
        if result is not None and answerable and result.call_id in waiting:
            waiting.discard(result.call_id)
            continue
        # ``message`` begins a step: the one before it must have had all its answers.
        if waiting:
            ids = ", ".join(repr(c.id) for c in calls if c.id in waiting)
            raise ToolPairsBroken(
                f"tool call {ids} has no result before the conversation goes on; send the "
                "results right after the assistant message that made the calls"
            )
        if result is not None and result.call_id not in opaque_calls:
            raise ToolPairsBroken(
                f"the tool result for call {result.call_id!r} answers no call of the assistant "
                "message before it (or answers one twice); send each result once, right after "
                "the message with its call"
            )
        opaque_calls |= _opaque_call_ids(message)
        calls = message.tool_calls
        waiting = {c.id for c in calls}
        answerable = message.role is Role.ASSISTANT
