"""The proxy counts the instructions and the tool list a client resends on every request once
per tenant: the count found must be the count made, and one tenant's count is never found by
another (how fast a request is answered must not tell what another tenant sent)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from comal.messages import Message
from comal.serve import _turn
from comal.tokens import count_messages, default_counter

_TEXTS = st.text(max_size=200)


@settings(max_examples=80, deadline=None)
@given(st.lists(_TEXTS, max_size=3), st.sampled_from(["a", "b"]))
def test_a_remembered_count_is_the_count(texts: list[str], tenant: str) -> None:
    counter = default_counter()
    instructions = [Message.system(t) for t in texts]
    expected = count_messages(counter, instructions)
    for _ in range(2):  # counted, then found
        assert _turn._instruction_tokens(tenant, counter, instructions) == expected


def test_one_tenants_count_is_not_found_by_another() -> None:
    counter = default_counter()
    _turn._COUNTED.clear()
    secret = [Message.system("the instructions only tenant a sends " * 40)]
    _turn._instruction_tokens("a", counter, secret)
    assert {key[0] for key in _turn._COUNTED} == {"a"}
    calls: list[str] = []
    _turn._counted("b", counter, "instructions", "x", lambda: calls.append("b") or 1)
    _turn._counted("b", counter, "instructions", "x", lambda: calls.append("b") or 1)
    assert calls == ["b"]
    assert _turn._instruction_tokens("b", counter, secret) == count_messages(counter, secret)
    assert {key[0] for key in _turn._COUNTED} == {"a", "b"}
