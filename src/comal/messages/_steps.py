"""Steps and pairs, derived from a message sequence (never stored as separate state).

A *step* is one assistant message plus the tool messages answering its calls. A *pair* is a tool
call and its result. Messages that are neither (system, user) form single-message groups, so a
sequence of messages always partitions into :class:`Group` values that can be kept or dropped
whole without splitting a pair.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ._parts import Message, Role, ToolCall, ToolResult


@dataclass(frozen=True, slots=True)
class Pair:
    call: ToolCall
    result: ToolResult | None  # None: the call is still open (no result recorded)


@dataclass(frozen=True, slots=True)
class Group:
    """Contiguous messages that must stay together: ``start`` indexes the source sequence."""

    start: int
    messages: tuple[Message, ...]

    @property
    def is_step(self) -> bool:
        return self.messages[0].role is Role.ASSISTANT

    @property
    def open_calls(self) -> tuple[ToolCall, ...]:
        answered = {m.tool_result.call_id for m in self.messages if m.tool_result is not None}
        calls = self.messages[0].tool_calls
        return tuple(c for c in calls if c.id not in answered)


def group_messages(messages: Sequence[Message]) -> list[Group]:
    """Partition ``messages`` into groups; tool messages join the step whose call they answer.

    A tool message whose call is not in the current step (an orphan) forms its own group: it is
    reported, not silently re-attached elsewhere.
    """
    # Every assembly and every proxied request walks its whole history through here: the
    # loop reads each message's role once and builds no set for a message without calls.
    groups: list[Group] = []
    current: list[Message] = []
    start = 0
    waiting: set[str] = set()
    tool, assistant = Role.TOOL, Role.ASSISTANT
    for i, msg in enumerate(messages):
        role = msg.role
        if waiting and role is tool:
            call_id = msg.parts[0].call_id  # type: ignore[union-attr]  # a tool message's result
            if call_id in waiting:
                current.append(msg)
                waiting.discard(call_id)
                continue
        if current:
            groups.append(Group(start, tuple(current)))
        start, current = i, [msg]
        calls = msg.tool_calls
        waiting = {c.id for c in calls} if calls and role is assistant else set()
    if current:
        groups.append(Group(start, tuple(current)))
    return groups


def pairs(messages: Iterable[Message]) -> list[Pair]:
    """Every tool call with its result (matched by id), in call order."""
    calls: list[ToolCall] = []
    results: dict[str, ToolResult] = {}
    for msg in messages:
        calls.extend(msg.tool_calls)
        if msg.tool_result is not None:
            results.setdefault(msg.tool_result.call_id, msg.tool_result)
    return [Pair(c, results.get(c.id)) for c in calls]


def open_calls(messages: Iterable[Message]) -> list[ToolCall]:
    """Tool calls without a result: a session ending here is paused, not finished."""
    return [p.call for p in pairs(messages) if p.result is None]


def orphan_results(messages: Iterable[Message]) -> list[ToolResult]:
    """Tool results whose call id never appeared before them."""
    seen: set[str] = set()
    orphans: list[ToolResult] = []
    for msg in messages:
        seen.update(c.id for c in msg.tool_calls)
        r = msg.tool_result
        if r is not None and r.call_id not in seen:
            orphans.append(r)
    return orphans
