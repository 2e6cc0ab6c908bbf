"""Memory a person manages (DRV-7) in the ledger and the library, on both backends: notes,
forgets that keep the ledger append-only, pages newest first, exact matches ranked first with
why each matched, the model's memory_search after a forget, the TUI's ``#`` through Textual's
pilot, and search plans that never scan a table."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from _agent_support import reply, rig, text, tool
from _pg_support import LedgerStore
from _tui_support import until as _until
from comal.agent import Config, Flags, Runtime
from comal.errors import ScopeError, UserError
from comal.ledger import (
    LedgerBackend,
    LedgerRowDamaged,
    MemoryInput,
    MemoryNotFound,
    Scope,
    open_ledger,
    verify,
)
from comal.memory import add_note, forget, list_memories, memory_search, remember
from comal.messages import Message, ToolCall
from comal.ops import receipts
from comal.testing import ScriptedProvider
from comal.tui import ComalApp

FACT = "We decided to deploy the billing service to eu-west-3 on Fridays only."


def _past(led: LedgerBackend, tenant: str = "acme", agent: str = "coder") -> Scope:
    """A past session of the agent whose steps were remembered (a decision, a path)."""
    write = ToolCall("c1", "Write", json.dumps({"path": "hello.txt", "content": "hi\n"}))
    scope = led.create_session(
        tenant,
        agent,
        messages=[
            Message.user(FACT),
            Message.assistant("I'll write the greeting to hello.txt.", write),
            Message.tool("c1", "wrote 3 bytes to hello.txt"),
        ],
    )
    remember(led, scope, 0, 2, "checkpointed")
    return scope


def _noise(led: LedgerBackend, n: int = 8) -> None:
    """Sessions that say hello and name .txt files, none of them hello.txt: what BM25 over
    the words hello and txt ranks first."""
    for _ in range(n):
        led.create_session("acme", "coder", messages=[
            Message.user("hello"), Message.assistant("hello! txt txt notes.txt readme.txt"),
        ])  # fmt: skip


def test_a_note_is_the_agents_sealed_and_found_from_any_session(any_ledger: LedgerBackend) -> None:
    # covers: DRV-7, MEM-2, LED-2
    past = _past(any_ledger)
    note, added = add_note(any_ledger, "acme", "coder", "  deploys go through ship.sh  ", by="ana")
    assert added and (note.kind, note.text, note.extractor) == (
        "note", "deploys go through ship.sh", "user:ana",
    )  # fmt: skip
    assert (note.session, note.first_seq, note.entry_ids) == (None, None, ())
    again, added = add_note(any_ledger, "acme", "coder", "deploys go through ship.sh", by="bob")
    assert (again.id, added) == (note.id, False)  # held already: not stored twice
    # Found from any session of the agent, never from another agent's or tenant's.
    asking = any_ledger.create_session("acme", "coder", messages=[Message.user("how to deploy?")])
    found = memory_search(any_ledger, "acme", "coder", "ship.sh", session=asking.session)
    assert [(r.kind, r.id, r.label, r.source) for r in found][:1] == [
        ("memory", note.id, "note", "user:ana")
    ]
    assert found[0].as_dict()["session"] is None and found[0].match.how == "exact"
    assert memory_search(any_ledger, "acme", "spy", "ship.sh") == []
    assert memory_search(any_ledger, "rival", "coder", "ship.sh") == []
    # A note outlives every session: deleting the one it was typed beside leaves it.
    any_ledger.delete_session(past)
    assert any_ledger.search_memories("acme", "coder", "ship")[0][0].id == note.id
    for bad in ("", "   ", "x" * 2_001, "nul\x00"):
        with pytest.raises(UserError):
            add_note(any_ledger, "acme", "coder", bad, by="ana")
    with pytest.raises(ScopeError):
        add_note(any_ledger, "acme", "", "a fact", by="ana")
    assert verify(any_ledger).ok


def test_forget_is_recorded_and_honoured_by_search_list_and_extraction(
    any_ledger: LedgerBackend,
) -> None:
    # covers: DRV-7, MEM-1, MEM-2
    past = _past(any_ledger)
    decision = next(m for m in any_ledger.memories(past) if "greeting" in m.text)
    assert memory_search(any_ledger, "acme", "coder", "greeting")[0].id == decision.id
    done, new = forget(any_ledger, "acme", "coder", decision.id, by="ana", why="wrong file")
    assert new and (done.memory, done.by, done.why, done.digest) == (
        decision.id, "user:ana", "wrong file", decision.digest,
    )  # fmt: skip
    assert forget(any_ledger, "acme", "coder", decision.id, by="bob")[0] == done  # once
    # Never found again by search (its entry still is: the session's history is kept)...
    found = memory_search(any_ledger, "acme", "coder", "greeting")
    assert found and all(r.kind == "entry" for r in found)
    assert not any_ledger.search_memories("acme", "coder", "greeting")
    # ...nor listed, but with --all, marked forgotten; the row itself is still stored.
    listed = list_memories(any_ledger, "acme", "coder", limit=50)
    assert decision.id not in {m.id for m, _ in listed.items}
    everything = dict((m.id, f) for m, f in list_memories(
        any_ledger, "acme", "coder", limit=50, forgotten=True).items)  # fmt: skip
    assert everything[decision.id] == done
    assert decision in any_ledger.memories(past)
    # The same fact from later entries of the agent is not remembered again: forgotten stays so.
    later = any_ledger.create_session("acme", "coder", messages=[Message.user("x")])
    again = MemoryInput("decision", decision.text, (0,))
    assert any_ledger.add_memories(later, 0, 0, [again], why="t", extractor="e").memories == ()
    # Another agent's memory, or none, cannot be forgotten through this agent.
    spy = _past(any_ledger, agent="spy")
    theirs = any_ledger.memories(spy)[0].id
    for bad in (theirs, 10**9):
        with pytest.raises(MemoryNotFound) as err:
            forget(any_ledger, "acme", "coder", bad, by="ana")
        assert err.value.code == "MEMORY_NOT_FOUND"
    assert all(f is None for _, f in any_ledger.agent_memories("acme", "spy", forgotten=True))
    assert verify(any_ledger).ok
    # Deleting the session takes its memories' forgets with them, counted in the tombstone.
    gone = any_ledger.delete_session(past)
    assert gone.rows["memory_forgets"] == 1 and verify(any_ledger).ok


def test_list_pages_newest_first_with_where_each_came_from(any_ledger: LedgerBackend) -> None:
    # covers: DRV-7
    past = _past(any_ledger)
    notes = [add_note(any_ledger, "acme", "coder", f"note {i}", by="ana")[0] for i in range(5)]
    first = list_memories(any_ledger, "acme", "coder", limit=3)
    assert [m.id for m, _ in first.items] == [n.id for n in notes[::-1][:3]]
    rest = list_memories(any_ledger, "acme", "coder", limit=50, before=first.next)
    ids = [m.id for m, _ in first.items + rest.items]
    assert ids == sorted(ids, reverse=True) and rest.next is None
    facts = [m for m, _ in rest.items if m.session is not None]
    assert facts and all(m.session == past.session and m.entry_ids for m in facts)
    shown = first.as_dict()["memories"][0]
    assert (shown["kind"], shown["source"], shown["session"], shown["forgotten"]) == (
        "note", "user:ana", None, None,
    )  # fmt: skip
    with pytest.raises(UserError):
        list_memories(any_ledger, "acme", "coder", limit=0)


def test_exact_matches_rank_first_and_say_why(any_ledger: LedgerBackend) -> None:
    # covers: DRV-7, MEM-2
    _noise(any_ledger)
    past = _past(any_ledger)
    note, _ = add_note(any_ledger, "acme", "coder", "greetings go in hello.txt, never othello.txt",
                       by="ana")  # fmt: skip
    unremembered = any_ledger.create_session(
        "acme", "coder", messages=[Message.user("what is in HELLO.TXT now?")]
    )
    found = memory_search(any_ledger, "acme", "coder", "hello.txt")
    exact = [r for r in found if r.match is not None and r.match.how == "exact"]
    assert exact and found[: len(exact)] == exact  # every exact match before any other
    for r in exact:
        assert "hello.txt" in (r.text if r.kind == "memory" else _text(any_ledger, r)).lower()
        assert "«hello.txt»" in r.match.snippet.lower()
    # The past session's facts (their entries folded in), the note, the entry never remembered.
    assert {r.session for r in exact} == {past.session, None, unremembered.session}
    assert note.id in {r.id for r in exact if r.kind == "memory"}
    assert [r.kind for r in exact if r.session == unremembered.session] == ["entry"]
    # The noise matched its words side by side, or some of them, and says which.
    rest = found[len(exact) :]
    assert rest and {r.match.how for r in rest} <= {"phrase", "words"}
    words = [r for r in rest if r.match.how == "words"]
    assert all(set(r.match.words) < {"hello", "txt"} for r in words)
    assert all("«" in r.match.snippet for r in rest)
    # A word inside a longer word is not an exact match.
    other = memory_search(any_ledger, "acme", "coder", "othello")
    assert other[0].match.how == "exact" and "«othello»" in other[0].match.snippet
    assert memory_search(any_ledger, "acme", "coder", "hello.tx") == [] or all(
        r.match.how != "exact" for r in memory_search(any_ledger, "acme", "coder", "hello.tx")
    )


def _text(led: LedgerBackend, r: Any) -> str:
    return next(e.message.text for e in led.entries(Scope("acme", "coder", r.session))
                if e.id == r.id)  # fmt: skip


def test_a_changed_forget_is_named_by_verify(ledger_store: LedgerStore) -> None:
    # covers: DRV-7, LED-6
    with ledger_store.open() as led:
        past = _past(led)
        victim = led.memories(past)[0]
        forget(led, "acme", "coder", victim.id, by="ana", why="stale")
        note, _ = add_note(led, "acme", "coder", "a person's note", by="ana")
        assert verify(led).ok
    # Re-point the forget at another memory, and turn a fact into a sessionless "note".
    ledger_store.execute(f"UPDATE memory_forgets SET why = 'nothing' WHERE memory_id = {victim.id}")
    ledger_store.execute(f"UPDATE memories SET body = 'forged' WHERE id = {note.id}")
    with ledger_store.open() as led:
        kinds = {(f.table, f.kind) for f in verify(led).faults}
        assert ("memory_forgets", "seal") in kinds and ("memories", "digest") in kinds
        with pytest.raises(LedgerRowDamaged):
            led.agent_memories("acme", "coder", forgotten=True)


def test_an_older_ledger_keeps_its_memories_and_takes_notes(tmp_path: Path) -> None:
    # covers: DRV-7, LED-4
    from comal.ledger import MIGRATIONS

    path = tmp_path / "old.db"
    with open_ledger(path) as led:
        past = _past(led)
        before = led.memories(past)
    # Back to the schema before notes: drop what 0012/0013 added, as an older comal left it.
    raw = sqlite3.connect(path)
    raw.executescript(
        "DROP TABLE memory_forgets; DROP INDEX memories_agent;"
        "DELETE FROM schema_migrations WHERE name IN ('0012_memory_notes', '0013_memory_forgets');"
        f"PRAGMA user_version = {len(MIGRATIONS) - 2};"
    )
    raw.close()
    with open_ledger(path) as led:
        assert led.memories(past) == before and verify(led).ok
        _, added = add_note(led, "acme", "coder", "taken after the upgrade", by="ana")
        assert added and verify(led).ok


def test_the_model_never_recalls_a_forgotten_memory(tmp_path: Path) -> None:
    # covers: DRV-7, MEM-2, OPS-1
    r = rig(tmp_path)  # a session of tenant "t", agent "a"
    past = _past(r.ledger, "t", "a")
    decision = next(m for m in r.ledger.memories(past) if "greeting" in m.text)
    note, _ = add_note(r.ledger, "t", "a", "greetings go in hello.txt", by="ana")
    forget(r.ledger, "t", "a", decision.id, by="ana", why="wrong")
    provider = ScriptedProvider(
        [reply(tool("m1", "memory_search", query="hello.txt")), reply(text("ok"))]
    )
    assert r.agent(provider).run("Where do greetings go?").status == "finished"
    recalled = provider.calls[1].messages[-1].text
    assert f"memory {note.id} (note)" in recalled and "«hello.txt»" in recalled
    assert f"memory {decision.id} " not in recalled  # its entry may be found; the memory never
    (receipt,) = [x for x in receipts(r.ledger, r.scope) if x.call_id == "m1"]
    seen = receipt.observations["results"]
    assert decision.id not in {x["id"] for x in seen if x["kind"] == "memory"}
    assert seen[0]["match"] == "exact"


# -- the TUI's # ----------------------------------------------------------------------------
def test_the_tuis_hash_remembers_instead_of_sending(tmp_path: Path) -> None:
    # covers: DRV-7
    led = open_ledger(tmp_path / "tui.db")
    provider = ScriptedProvider([])  # a prompt sent to the model would fail the test
    config = Config(mode="ask", agent="tui")
    flags = Flags(model="anthropic:claude-sonnet-4-6", context_window=32_000, workspace=tmp_path)
    rt = Runtime.open(led, flags, config=config, provider=provider)
    rt.user = "ana"
    app = ComalApp(rt)

    def shown() -> str:
        return "\n".join(str(w.render()) for w in app.query(Static))

    async def drive() -> None:
        async with app.run_test() as pilot:
            await pilot.click("Input")
            await pilot.press(*"# deploys go through scripts/ship.sh", "enter")
            await _until(pilot, lambda: "remembered as memory" in shown())
            await pilot.press(*"/memory", "enter")
            await _until(pilot, lambda: "by ana: deploys go through" in shown())
            await pilot.press(*"/memory ship.sh", "enter")
            await _until(pilot, lambda: "[exact] memory" in shown())
            await pilot.press(*"/forget 1 moved", "enter")
            await _until(pilot, lambda: "forgot memory 1" in shown())
            said.append(shown())

    said: list[str] = []
    try:
        asyncio.run(drive())
        (said_text,) = said
        assert "a note of agent 'tui' (tenant 'local'), by ana" in said_text  # where it went
        assert "/forget 1 takes it back" in said_text
        assert provider.calls == [] and rt.scope is None  # nothing was sent, no session begun
        ((memory, gone),) = led.agent_memories("local", "tui", forgotten=True)
        assert (memory.kind, memory.text, memory.extractor) == (
            "note", "deploys go through scripts/ship.sh", "user:ana",
        )  # fmt: skip
        assert gone is not None and (gone.by, gone.why) == ("user:ana", "moved")
    finally:
        rt.close()
        led.close()


# -- bounded: no search plan scans a table ----------------------------------------------------
_SCAN = re.compile(r"\bSCAN (?!memories_fts|entries_fts|CONSTANT ROW)(\w+)")


def test_search_list_and_forget_never_scan_a_table(tmp_path: Path) -> None:
    # covers: DRV-7, MEM-2
    with open_ledger(tmp_path / "plan.db") as led:
        _noise(led, 3)
        past = _past(led)
        asking = led.create_session("acme", "coder", messages=[Message.user("x")])
        add_note(led, "acme", "coder", "greetings go in hello.txt", by="ana")
        statements: list[tuple[str, tuple[Any, ...]]] = []
        with led.trace(lambda sql, params: statements.append((sql, tuple(params or ())))):
            memory_search(led, "acme", "coder", "hello.txt", session=asking.session)
            memory_search(led, "acme", "coder", "greeting")
            page = list_memories(led, "acme", "coder", limit=2, forgotten=True)
            list_memories(led, "acme", "coder", limit=2, before=page.next)
            forget(led, "acme", "coder", led.memories(past)[0].id, by="ana")
        reads = [(s, p) for s, p in statements if s.lstrip().upper().startswith("SELECT")]
        assert len(reads) > 8
        raw = sqlite3.connect(tmp_path / "plan.db")
        for sql, params in reads:
            plan = " | ".join(r[3] for r in raw.execute("EXPLAIN QUERY PLAN " + sql, params))
            assert not _SCAN.search(plan), (sql, plan)
        raw.close()
