"""The canonical body format: stable bytes, lossless decode."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from comal.messages import (
    CacheHint,
    Checkpoint,
    EvidenceRef,
    Media,
    Message,
    Reasoning,
    Role,
    Summary,
    Text,
    ToolCall,
    ToolResult,
    canonical_json,
    message_from_json,
    message_to_json,
)
from comal.messages._codec import load_json

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)))
_leaf = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | _text
_values = st.recursive(_leaf, lambda c: st.lists(c) | st.dictionaries(_text, c), max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_canonical_json_is_json_dumps_sorted_compact(value: Any) -> None:
    # covers: LED-6
    assert canonical_json(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert load_json(canonical_json(value)) == value


# Any text at all, lone surrogates included: bodies must survive what tools really print.
_any = st.text()
_cache = st.none() | st.builds(CacheHint, st.sampled_from(["ephemeral"]), st.none() | _any)
_media = st.builds(
    Media, _any, st.none() | _any, st.none() | _any, st.none() | st.integers(0, 2**63 - 1)
)
_parts = st.one_of(
    st.builds(Text, _any, _cache),
    st.builds(Reasoning, _any, st.none() | _any, st.none() | _any, st.booleans()),
    st.builds(ToolCall, _any, _any, _any),
    _media,
    st.builds(
        EvidenceRef,
        st.integers(0, 2**62),
        _any,
        _any,
        st.integers(0, 2**62),
        st.integers(0, 2**62),
        _any,
    ),
    st.builds(Summary, _any, st.integers(0, 5)),
    st.builds(Checkpoint, _any, st.integers(0, 9), st.integers(10, 20)),
)
_results = st.builds(
    ToolResult, _any, _any | st.lists(st.builds(Text, _any) | _media).map(tuple), st.booleans()
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    if draw(st.booleans()):
        return Message(Role.TOOL, (draw(_results),))
    role = draw(st.sampled_from([Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.DEVELOPER]))
    return Message(role, tuple(draw(st.lists(_parts, max_size=4))), draw(st.none() | _any))


@settings(max_examples=200, deadline=None)
@given(messages())
def test_message_bodies_round_trip_and_are_stable(msg: Any) -> None:
    # covers: LED-1, LED-6
    body = message_to_json(msg)
    assert message_from_json(body) == msg
    assert message_to_json(message_from_json(body)) == body


def test_integers_beyond_64_bits_are_refused() -> None:
    # covers: LED-1
    import pytest

    with pytest.raises(ValueError, match="64-bit"):
        canonical_json({"size": 2**64})
