"""The depth bound on request bodies (issue 18) with the resent history not walked again: an item
the item cache has read was walked when it was read, so only new items and the rest of the body
are walked on each request. The verdict must be the one the walk over the whole body gives,
whether the items were read before (by this tenant) or not, on every route."""

# covers: INT-2

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comal.messages.wire import wire_protocol
from comal.serve._body import MAX_DEPTH
from comal.serve._body import too_deep as _too_deep
from comal.serve._errors import JSONTooDeep
from comal.serve._wire import ItemCache, parse_request


def _nested(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def _item(protocol: str, n: int, extra: object) -> dict[str, object]:
    # Valid on its route whatever ``extra`` holds: only the depth can refuse it.
    kind = "input_text" if protocol == "openai_responses" else "text"
    return {"role": "user", "content": [{"type": kind, "text": f"hi {n}", "extra": extra}]}


_KEY = {"anthropic": "messages", "openai_chat": "messages", "openai_responses": "input"}


@settings(max_examples=120, deadline=None)
@given(
    protocol=st.sampled_from(["anthropic", "openai_chat", "openai_responses"]),
    depths=st.lists(st.integers(0, MAX_DEPTH + 4), min_size=1, max_size=4),
    metadata=st.integers(0, MAX_DEPTH + 2),
    tenant=st.sampled_from(["a", "b"]),
)
def test_the_verdict_is_the_whole_body_walk_cold_or_warm(
    protocol: str,
    depths: list[int],
    metadata: int,
    tenant: str,
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("comal.serve._wire.ITEMS", ItemCache())  # cold for each example
        verdicts = _grow(protocol, depths, metadata, tenant)
    assert verdicts and all(refused == walked for refused, walked in verdicts), verdicts


def _grow(protocol: str, depths: list[int], metadata: int, tenant: str) -> list[tuple[bool, bool]]:
    """(refused by parse_request, too deep by the whole-body walk) for each request sent."""
    verdicts: list[tuple[bool, bool]] = []
    items = [_item(protocol, n, _nested(d, "x")) for n, d in enumerate(depths)]
    body = {"model": "m", _KEY[protocol]: items, "metadata": _nested(metadata, 1)}
    # The growing conversation: each shorter prefix first (what the cache holds), then the whole.
    for k in range(1, len(items) + 1):
        prefix = orjson.dumps({**body, _KEY[protocol]: items[:k]})
        for _ in range(2):  # cold, then found in the cache
            try:
                parse_request(wire_protocol(protocol), prefix, tenant)
                refused = False
            except JSONTooDeep:
                refused = True
            verdicts.append((refused, _too_deep(orjson.loads(prefix))))
    return verdicts


def test_a_deep_item_after_a_cached_history_is_refused_with_its_code() -> None:
    history = [_item("anthropic", n, "x") for n in range(3)]
    body = {"model": "m", "max_tokens": 5, "messages": history}
    anthropic = wire_protocol("anthropic")
    parse_request(anthropic, orjson.dumps(body), "t")
    deep = _item("anthropic", 9, _nested(MAX_DEPTH, 1))
    with pytest.raises(JSONTooDeep):
        parse_request(anthropic, orjson.dumps({**body, "messages": [*history, deep]}), "t")
    with pytest.raises(JSONTooDeep):  # not an object, and too deep: the depth is said first
        parse_request(anthropic, orjson.dumps({**body, "messages": [_nested(MAX_DEPTH, 1)]}))
