"""Memories across sessions in the ledger: the extractor, the flush rules, sealing, search and
its scope (MEM-1, MEM-2), on both backends where the ledger is involved."""

from __future__ import annotations

import json

import pytest

from _pg_support import LedgerStore
from comal.errors import ScopeError, UserError
from comal.ledger import (
    LedgerBackend,
    LedgerRowDamaged,
    MemoryInput,
    MemorySearchTimeout,
    Scope,
    open_ledger,
    verify,
)
from comal.memory import extract_facts, memory_search, remember, render_recalled
from comal.messages import Message, ToolCall

CALL = ToolCall("c1", "Bash", json.dumps({"command": "pytest -q tests/test_api.py"}))


def _work(led: LedgerBackend, tenant: str = "acme", agent: str = "coder") -> Scope:
    """A session with one fact of every kind the extractor knows."""
    return led.create_session(
        tenant,
        agent,
        messages=[
            Message.user(
                "I prefer tabs over spaces in this repo. The release is due on 2025-03-14, "
                "ask Priya Raman before merging."
            ),
            Message.assistant("Let me run the failing suite first.", CALL),
            Message.tool("c1", "FAILED tests/test_api.py::test_login - KeyError\n[exit code 1]"),
            Message.assistant(
                "We decided to pin httpx_client to 0.27 because the new retry_policy breaks "
                "src/api/client.py."
            ),
        ],
    )


def test_the_extractor_keeps_each_kind_with_its_sources(tmp_path: object) -> None:
    # covers: MEM-1
    led = open_ledger(":memory:")
    scope = _work(led)
    facts = extract_facts(led.entries(scope))
    by_kind = {f.kind: f for f in facts}
    assert {"preference", "date", "command", "decision", "path", "identifier", "name"} <= set(
        by_kind
    )
    command = by_kind["command"]
    assert "pytest -q tests/test_api.py" in command.text and "exit 1" in command.text
    assert "KeyError" in command.text and command.seqs == (1, 2)  # the call and its result
    assert by_kind["preference"].text.startswith("user: I prefer tabs")
    assert any("2025-03-14" in f.text for f in facts if f.kind == "date")
    assert any("Priya Raman" in f.text for f in facts if f.kind == "name")
    assert any("src/api/client.py" in f.text for f in facts if f.kind == "path")
    assert any("httpx_client" in f.text for f in facts if f.kind == "identifier")
    assert extract_facts(led.entries(scope)) == facts  # deterministic


def test_a_range_is_flushed_once_and_facts_keep_to_their_flush(any_ledger: LedgerBackend) -> None:
    # covers: MEM-1
    scope = _work(any_ledger)
    fact = MemoryInput("decision", "pin httpx to 0.27", (3,))
    first = any_ledger.add_memories(scope, 2, 3, [fact], why="test", extractor="extractive")
    assert [(f.first_seq, f.last_seq, f.facts) for f in first.flushes] == [(2, 3, 1)]
    (memory,) = first.memories
    assert memory.entry_ids == (any_ledger.entries(scope)[3].id,)
    assert (memory.tenant, memory.agent, memory.session) == tuple(
        getattr(scope, k) for k in ("tenant", "agent", "session")
    )
    # Overlapping again: only seq 0..1 is new, and a fact reaching into the old flush is dropped.
    outside = MemoryInput("path", "reaches seq 2", (1, 2))
    again = any_ledger.add_memories(
        scope, 0, 3, [fact, outside, MemoryInput("date", "due 2025-03-14", (0,))],
        why="test", extractor="extractive",
    )  # fmt: skip
    assert [(f.first_seq, f.last_seq) for f in again.flushes] == [(0, 1)]
    assert [m.text for m in again.memories] == ["due 2025-03-14"]
    assert any_ledger.add_memories(scope, 0, 3, [fact], why="t", extractor="e").flushes == ()
    assert any_ledger.memory_gaps(scope, 0, 99) == []
    # The same fact from another session of the agent is not stored twice.
    other = any_ledger.create_session("acme", "coder", messages=[Message.user("x")])
    dup = MemoryInput("decision", "pin httpx to 0.27", (0,))
    assert any_ledger.add_memories(other, 0, 0, [dup], why="t", extractor="e").memories == ()
    with pytest.raises(UserError):
        any_ledger.add_memories(scope, 0, 9, [], why="t", extractor="e")
    assert verify(any_ledger).ok


def test_a_changed_memory_is_named_by_verify_and_refused_on_read(
    ledger_store: LedgerStore,
) -> None:
    # covers: MEM-1, LED-6
    with ledger_store.open() as led:
        scope = _work(led)
        remember(led, scope, 0, 3, "test")
        assert led.memories(scope) and verify(led).ok
    ledger_store.execute("UPDATE memories SET body = 'I prefer spaces' WHERE kind = 'preference'")
    ledger_store.execute("UPDATE memories SET agent = 'other' WHERE kind = 'date'")
    with ledger_store.open() as led:
        kinds = {(f.table, f.kind) for f in verify(led).faults}
        assert ("memories", "digest") in kinds and ("memories", "seal") in kinds
        with pytest.raises(LedgerRowDamaged):
            led.memories(scope)


def _two_agents(led: LedgerBackend) -> tuple[Scope, Scope, Scope, Scope]:
    mine = _work(led)
    theirs = _work(led, agent="spy")
    other_tenant = _work(led, tenant="rival")
    for scope in (mine, theirs, other_tenant):
        remember(led, scope, 0, 3, "test")
    asking = led.create_session("acme", "coder", messages=[Message.user("what did we pin?")])
    return mine, theirs, other_tenant, asking


def test_memory_search_never_reaches_another_agent_or_tenant(any_ledger: LedgerBackend) -> None:
    # covers: MEM-2, LED-2
    mine, theirs, rival, asking = _two_agents(any_ledger)
    attacks = [
        "httpx pin tabs",
        'httpx" OR "tabs',  # FTS syntax is only words here
        "tenant:rival agent:spy httpx",
        "* OR NOT ( ) NEAR tabs",
        "httpx; DROP TABLE memories; --",
    ]
    for query in attacks:
        found = memory_search(any_ledger, "acme", "coder", query, session=asking.session)
        assert {r.session for r in found} <= {mine.session}, query
    found = memory_search(any_ledger, "acme", "coder", "httpx tabs", session=asking.session)
    assert found and {r.kind for r in found} >= {"memory"}
    # The other agents find their own, and only their own.
    spy = memory_search(any_ledger, "acme", "spy", "httpx tabs")
    assert spy and {r.session for r in spy} == {theirs.session}
    rivals = memory_search(any_ledger, "rival", "coder", "tabs")
    assert {r.session for r in rivals} == {rival.session}
    # An incomplete scope is a coded refusal, never a search of everything.
    for tenant, agent in (("acme", None), (None, "coder"), ("", "coder"), ("acme", "")):
        with pytest.raises(ScopeError) as err:
            memory_search(any_ledger, tenant, agent, "httpx")
        assert err.value.code == "SCOPE_INCOMPLETE"
    with pytest.raises(ScopeError):  # a session that is not the agent's cannot be borrowed
        memory_search(any_ledger, "acme", "coder", "httpx", session=theirs.session)
    with pytest.raises(ScopeError):
        any_ledger.search_memories("acme", "", "httpx")


def test_ranking_fuses_memories_and_past_sessions(any_ledger: LedgerBackend) -> None:
    # covers: MEM-2, LED-5
    mine, _, _, asking = _two_agents(any_ledger)
    noise = [Message.user(f"chatter about tabs number {i} and more tabs") for i in range(6)]
    past = any_ledger.create_session("acme", "coder", messages=noise)
    query = "Priya Raman release"
    found = memory_search(any_ledger, "acme", "coder", query, session=asking.session)
    top = found[0]
    # The memory and the entry it came from are one result, ranked first: both rankings agree.
    assert top.kind == "memory" and top.session == mine.session and "Priya Raman" in top.text
    assert all(r.session != asking.session for r in found)  # the caller's own is not searched
    remembered = {i for r in found if r.kind == "memory" for i in r.entry_ids}
    assert not any(r.kind == "entry" and r.id in remembered for r in found)  # folded in
    chatter = memory_search(any_ledger, "acme", "coder", "chatter", session=asking.session)
    assert chatter and all(r.kind == "entry" and r.session == past.session for r in chatter)
    assert [r.score for r in chatter] == sorted((r.score for r in chatter), reverse=True)
    own = memory_search(any_ledger, "acme", "coder", "chatter", session=past.session)
    assert own == []  # from the past session itself: its entries are not "past"
    text = render_recalled(query, found)
    assert "memory" in text and mine.session[:8] in text


def test_search_caps(ledger: LedgerBackend) -> None:
    # covers: MEM-2
    scope = _work(ledger)
    remember(ledger, scope, 0, 3, "test")
    with pytest.raises(UserError):
        ledger.search_memories("acme", "coder", "tabs", limit=51)
    many = " ".join(f"w{i}" for i in range(200)) + " tabs"  # tabs is past the term cap
    assert ledger.search_memories("acme", "coder", many) == []
    assert ledger.search_memories("acme", "coder", "tabs " + many)
    facts = [MemoryInput("decision", f"decision {i} about tabs", (4,)) for i in range(400)]
    more = ledger.create_session("acme", "coder", messages=[Message.user("x")] * 5)
    ledger.add_memories(more, 0, 4, facts, why="t", extractor="e")
    with pytest.raises(MemorySearchTimeout) as err:  # a budget already spent: stopped at once
        ledger.search_memories("acme", "coder", "tabs decision about", budget_s=0.0)
    assert err.value.code == "MEMORY_SEARCH_TIMEOUT"


def test_a_deleted_session_takes_its_memories(any_ledger: LedgerBackend) -> None:
    # covers: MEM-1, MEM-2
    mine, _, _, _ = _two_agents(any_ledger)
    assert any_ledger.search_memories("acme", "coder", "tabs")
    deletion = any_ledger.delete_session(mine)
    assert deletion.rows["memories"] > 0 and deletion.rows["memory_flushes"] == 1
    assert any_ledger.search_memories("acme", "coder", "tabs") == []
    assert verify(any_ledger).ok
