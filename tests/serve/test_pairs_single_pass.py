"""check_pairs walks the request's messages in one pass (it runs on every request, over the whole
resent history): it must refuse exactly what the check over :func:`group_messages` refused, with
the same message, and accept everything else."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from comal.messages import Message, Opaque, Role, Text, ToolCall, ToolResult, group_messages
from comal.serve._errors import ToolPairsBroken
from comal.serve._pairs import _opaque_call_ids, check_pairs

IDS = ("a", "b", "c")


def _by_groups(messages: list[Message]) -> None:
    """The check as it was written over the steps :func:`group_messages` builds."""
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


def _call(i: str) -> ToolCall:
    return ToolCall(i, "f", "{}")


def _opaque(i: str) -> Opaque:
    return Opaque("openai_responses", json.dumps({"type": "local_shell_call", "call_id": i}))


_MESSAGES = st.one_of(
    st.just(Message.user("go")),
    st.lists(st.sampled_from(IDS), max_size=3).map(
        lambda ids: Message(Role.ASSISTANT, (Text("x"), *map(_call, ids)))
    ),
    st.sampled_from((*IDS, "z")).map(lambda i: Message.tool(i, "out")),
    st.sampled_from(("z", "a")).map(lambda i: Message(Role.ASSISTANT, (_opaque(i),))),
    # Calls in a message no result may answer (not the assistant's).
    st.sampled_from(IDS).map(lambda i: Message(Role.USER, (Text("u"), _call(i)))),
    st.sampled_from(IDS).map(lambda i: Message(Role.TOOL, (ToolResult(i, "e", True),))),
)


def _outcome(check: object, messages: list[Message]) -> str | None:
    try:
        check(messages)  # type: ignore[operator]
    except ToolPairsBroken as exc:
        return str(exc)
    return None


@settings(max_examples=600, deadline=None)
@given(st.lists(_MESSAGES, max_size=12))
def test_the_single_pass_refuses_what_the_grouped_check_refused(messages: list[Message]) -> None:
    assert _outcome(check_pairs, messages) == _outcome(_by_groups, messages)


def test_a_broken_conversation_is_still_refused() -> None:
    go, done = Message.user("go"), Message.user("done")
    asked = Message.assistant("", _call("a"), _call("b"))
    answered = [go, asked, Message.tool("b", "1"), Message.tool("a", "2"), done]
    check_pairs(answered)
    check_pairs([go, asked, Message.tool("a", "1")])  # open calls at the end: paused
    for broken in (
        [go, asked, Message.tool("a", "1"), done],
        [go, Message.tool("a", "1")],
        [*answered[:3], Message.tool("b", "again")],
    ):
        assert _outcome(check_pairs, broken) is not None
