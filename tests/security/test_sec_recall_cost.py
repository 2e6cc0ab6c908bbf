"""Issue 18: the model's recall queries over a 2,000-entry session have a bounded cost.

The probe's queries: ``ctx_search`` (dag) and ``session_search`` (pipeline) with 100 prefix
terms (``a* OR b* OR …``) over 2,000 entries ran 113 s, and ``ctx_search`` in words mode 8.3 s.
Two causes. ``session_search`` handed the model's text to FTS5 as query syntax (only a query
FTS5 could not parse was searched again as a phrase), so each ``x*`` expanded to every indexed
word it starts, over the whole index. And every session search, ``ctx_search``'s words mode
too, restricted FTS5 with ``rowid IN (the session's entry ids)``: SQLite hands FTS5 each id as
an equality constraint, so FTS5 ran the whole MATCH once per entry of the session (2,000 times
for one query). Now both tools read the query as text (``session_search``: a phrase of at most
64 words; ``ctx_search``: at most 32 distinct words, or a phrase), over the limits a query is
refused before any statement runs (``SEARCH_TOO_BROAD``), a session's MATCH runs once (one
ranged scan), and the database stops one still running at its time bound (``LEDGER_TIMEOUT``,
``test_sec_serve_recall``).

# covers: LED-5, DAG-7, PIP-1
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from typing import Any

import pytest

from comal.ledger import LedgerBackend, Scope, StepInput
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, default_registry

ENTRIES = 2_000
PREFIXES = " OR ".join(f"{c}*" for c in (string.ascii_lowercase * 4)[:100])
_RNG = random.Random(18)
VOCAB = [
    "".join(_RNG.choice(string.ascii_lowercase) for _ in range(_RNG.randint(3, 8)))
    for _ in range(3000)
]


@pytest.fixture
def big(any_ledger: LedgerBackend) -> Iterator[tuple[LedgerBackend, Scope]]:
    rng = random.Random(5)
    scope = any_ledger.create_session("t", "a")
    steps = [StepInput([Message.user(" ".join(rng.sample(VOCAB, 60)))]) for _ in range(ENTRIES)]
    any_ledger.append_steps(scope, steps)
    any_ledger.search(scope, "warm")  # the full-text index catches up first
    yield any_ledger, scope


def _call(led: LedgerBackend, scope: Scope, name: str, args: dict[str, Any]) -> tuple[str, str]:
    """The model's call through a house: (receipt status, the text the model gets)."""
    tool_call = ToolCall(f"c{name}", name, json.dumps(args))
    step = led.append(scope, [Message.assistant("", tool_call)])[0].step
    house = House.of(led, scope, default_registry(), Policy(mode="trusted"))
    outcome, receipt = house.handle(tool_call, Actor.user("ana"), join_step=step)
    return receipt.status, outcome.result.text


def test_the_probes_recall_queries_are_refused_or_cheap(
    big: tuple[LedgerBackend, Scope],
) -> None:
    led, scope = big
    # ctx_search reads the prefixes as words ("a", "or", "b", …: 27 of them): it runs, as text.
    status, text = _call(led, scope, "ctx_search", {"query": PREFIXES})
    assert status == "ok" and text.startswith("[ctx_search: no match"), text
    status, text = _call(led, scope, "ctx_search", {"query": " ".join(VOCAB[:32])})
    assert status == "ok" and " results for " in text.splitlines()[0], text
    statements: list[str] = []
    with led.trace(lambda sql, _args: statements.append(sql)):
        # session_search reads the prefixes as a 199-word phrase: refused before it runs.
        status, text = _call(led, scope, "session_search", {"query": PREFIXES})
        assert status == "error" and text.startswith("[SEARCH_TOO_BROAD]"), text
        # So is a words search over its word limit, and the model has no FTS5 mode at all.
        words = " ".join(VOCAB[:150])
        status, text = _call(led, scope, "ctx_search", {"query": words})
        assert status == "error" and text.startswith("[SEARCH_TOO_BROAD]"), text
        status, text = _call(led, scope, "ctx_search", {"query": PREFIXES, "mode": "fts"})
        assert status != "ok" and "mode" in text, text
    assert not [s for s in statements if "MATCH" in s or "@@" in s], statements


@pytest.mark.parametrize("query", [PREFIXES, " ".join(VOCAB[:32])])
def test_a_words_search_of_a_large_session_is_one_scan(ledger: Any, query: str) -> None:
    # Counted in SQLite's virtual-machine steps (its progress handler, every 1,000), not in
    # time. With "rowid IN (the session's ids)" FTS5 ran the MATCH once per entry: 2,280
    # thousand steps for the 32 words over 2,000 entries (2 to 4 s; 150 words: 17 s), 780
    # thousand for the prefixes read as words. As one ranged scan: 64 and 20 thousand.
    rng = random.Random(5)
    scope = ledger.create_session("t", "a")
    steps = [StepInput([Message.user(" ".join(rng.sample(VOCAB, 60)))]) for _ in range(ENTRIES)]
    ledger.append_steps(scope, steps)
    ledger.search(scope, "warm")
    counted = [0]

    def count() -> int:
        counted[0] += 1
        return 0

    ledger._db.raw.set_progress_handler(count, 1000)
    try:
        ledger.recall_search(scope, query, mode="words", summaries=False)
    finally:
        ledger._db.raw.set_progress_handler(None, 0)
    assert counted[0] < 400, counted[0]
