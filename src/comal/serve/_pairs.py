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

from ..messages import Message, Opaque, group_messages
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
    on and every result answers a call of the assistant message before it."""
    groups = group_messages(messages)
    opaque_calls: set[str] = set()
    for n, group in enumerate(groups):
        first = group.messages[0]
        result = first.tool_result
        if result is not None and result.call_id not in opaque_calls:
            raise ToolPairsBroken(
                f"the tool result for call {result.call_id!r} answers no call of the assistant "
                "message before it (or answers one twice); send each result once, right after "
                "the message with its call"
            )
        opaque_calls |= _opaque_call_ids(first)
        pending = group.open_calls
        if pending and n < len(groups) - 1:
            ids = ", ".join(repr(c.id) for c in pending)
            raise ToolPairsBroken(
                f"tool call {ids} has no result before the conversation goes on; send the "
                "results right after the assistant message that made the calls"
            )
