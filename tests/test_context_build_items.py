"""The limit engine's items and the steps under them, computed on every assembly over the whole
history (and, for steps, on every proxied request), are written for speed: they must equal what
the plain versions below give, field by field, on generated histories."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from comal.context import EngineCache
from comal.context._render import media_in, media_tokens
from comal.context.limit._config import EngineConfig, Limits
from comal.context.limit._stage_refs import Item, _facts, build_items
from comal.ledger import Entry
from comal.messages import (
    Group,
    Message,
    Role,
    Text,
    ToolCall,
    ToolResult,
    group_messages,
    message_to_json,
    sha256_hex,
)
from comal.tokens import Budget, default_counter

IDS = ("a", "b", "c")


def _plain_groups(messages: list[Message]) -> list[Group]:
    groups: list[Group] = []
    current: list[Message] = []
    start = 0
    waiting: set[str] = set()
    for i, msg in enumerate(messages):
        result = msg.tool_result
        if result is not None and result.call_id in waiting:
            current.append(msg)
            waiting.discard(result.call_id)
            continue
        if current:
            groups.append(Group(start, tuple(current)))
        start, current = i, [msg]
        waiting = {c.id for c in msg.tool_calls} if msg.role is Role.ASSISTANT else set()
    if current:
        groups.append(Group(start, tuple(current)))
    return groups


def _call(i: str, name: str) -> ToolCall:
    return ToolCall(i, name, "{}")


_TOOLS = st.sampled_from(("Bash", "EvidenceRead", "Read"))
_MESSAGES = st.one_of(
    st.just(Message.user("go")),
    st.lists(st.tuples(st.sampled_from(IDS), _TOOLS), max_size=3).map(
        lambda calls: Message(Role.ASSISTANT, (Text("x"), *(_call(i, n) for i, n in calls)))
    ),
    st.tuples(
        st.sampled_from((*IDS, "z")),
        st.none() | _TOOLS,
        st.booleans(),
        st.integers(1, 40).map(lambda n: "out " * n),
    ).map(lambda t: Message(Role.TOOL, (ToolResult(t[0], t[3], t[2], t[1]),))),
    st.sampled_from(IDS).map(lambda i: Message(Role.USER, (Text("u"), _call(i, "Bash")))),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_MESSAGES, max_size=14))
def test_steps_are_the_plain_partition(messages: list[Message]) -> None:
    assert group_messages(messages) == _plain_groups(messages)


def _plain_items(
    entries: tuple[Entry, ...], config: EngineConfig, limits: Limits, cache: EngineCache
) -> list[Item]:
    counter = config.token_counter
    items: list[Item] = []
    for g, group in enumerate(_plain_groups([e.message for e in entries])):
        calls = {c.id: c.name for m in group.messages for c in m.tool_calls}
        for offset in range(len(group.messages)):
            entry = entries[group.start + offset]
            chars, images = _facts(entry, counter, cache)
            assert chars <= config.max_single_message_chars and entry.tokens <= limits.single_bound
            result = entry.message.tool_result
            name = (result.name or calls.get(result.call_id)) if result is not None else None
            items.append(
                Item(
                    entry=entry,
                    group=g,
                    group_start=group.start,
                    message=entry.message,
                    tokens=entry.tokens,
                    bounded=None,
                    cache=cache,
                    image_tokens=media_tokens(counter, entry.message)
                    if media_in(entry.message)
                    else images,
                    is_result=result is not None,
                    referable=result is not None
                    and not result.is_error
                    and name not in config.never_reference_tools
                    and entry.tokens > config.min_reference_tokens,
                )
            )
    return items


@settings(max_examples=200, deadline=None)
@given(st.lists(_MESSAGES, max_size=14), st.integers(0, 30))
def test_items_are_the_plain_ones(messages: list[Message], least: int) -> None:
    counter = default_counter()
    config = EngineConfig(counter=counter, min_reference_tokens=least)
    entries = tuple(
        Entry(
            id=n + 1,
            session="s",
            seq=n,
            step=n,
            role=m.role.value,
            tokens=counter.count(message_to_json(m)),
            size=0,
            created_at="",
            digest=sha256_hex(message_to_json(m)),
            output_digest=None,
            message=m,
        )
        for n, m in enumerate(messages)
    )
    budget = Budget(200_000, system_tokens=0, tools_tokens=0, output_reserve=8_000, margin=500)
    limits = Limits.of(budget, config)
    cache = EngineCache()
    assert build_items(entries, config, limits, counter, cache) == _plain_items(
        entries, config, limits, cache
    )
