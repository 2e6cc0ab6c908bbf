"""The ledger on every backend: scoping, atomic steps, tails, search, verify.

Each test runs once against SQLite and once against PostgreSQL (LED-4: same interface, same
tests); the PostgreSQL run skips without ``COMAL_TEST_PG`` unless ``CI=true``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from _pg_support import LedgerStore
from comal.errors import LedgerError, SchemaVersionError, ScopeError, UserError
from comal.ledger import LedgerBackend, Scope, StepInput, UsageInput, verify
from comal.messages import Message, ToolCall, sha256_hex
from comal.tokens import Usage


@pytest.fixture
def ledger(any_ledger: LedgerBackend) -> Iterator[LedgerBackend]:
    # Overrides conftest's SQLite-only ``ledger`` for this module: every backend in turn.
    yield any_ledger


def _step(i: int, output: str = "out") -> list[Message]:
    call = ToolCall(f"c{i}", "Bash", f'{{"command": "echo {i}"}}')
    return [Message.assistant(f"step {i}", call), Message.tool(f"c{i}", f"{output} {i}")]


def test_append_and_read_back_exact(ledger: LedgerBackend) -> None:
    # covers: LED-1, LED-6
    scope = ledger.create_session("t", "a", title="demo")
    ledger.append(scope, [Message.user("hello 🌍\r\nworld")])
    entries = ledger.append(scope, _step(1, "x" * 5000))
    assert [e.seq for e in entries] == [1, 2]
    assert all(e.step == 1 for e in entries)
    back = ledger.entries(scope)
    assert [e.message for e in back] == [Message.user("hello 🌍\r\nworld"), *_step(1, "x" * 5000)]
    assert back[2].output_digest == sha256_hex("x" * 5000 + " 1")
    info = ledger.session(scope)
    assert info is not None and info.entries == 3 and info.tokens == sum(e.tokens for e in back)
    assert all(e.tokens > 0 for e in back)


def test_scope_isolation_wrong_tenant_or_agent_sees_nothing(
    ledger: LedgerBackend, caplog: pytest.LogCaptureFixture
) -> None:
    # covers: LED-2
    scope = ledger.create_session("acme", "coder")
    ledger.append(scope, [Message.user("secret")])
    for wrong in (Scope("other", "coder", scope.session), Scope("acme", "other", scope.session)):
        with caplog.at_level(logging.WARNING, logger="comal.ledger"):
            assert ledger.entries(wrong) == []
            assert ledger.tail(wrong, n=5) == []
            assert ledger.search(wrong, "secret") == []
            assert ledger.session(wrong) is None
            assert ledger.entry(wrong, 1) is None
        assert "refused" in caplog.text
        with pytest.raises(UserError):
            ledger.append(wrong, [Message.user("intrusion")])
    assert len(ledger.entries(scope)) == 1


@pytest.mark.parametrize("missing", ["tenant", "agent", "session"])
def test_incomplete_scope_fails_closed(missing: str) -> None:
    # covers: LED-2
    parts = {"tenant": "t", "agent": "a", "session": "s"} | {missing: ""}
    with pytest.raises(ScopeError, match=missing):
        Scope(**parts)


def test_sessions_have_uuid_parent_status(ledger: LedgerBackend) -> None:
    # covers: LED-3
    parent = ledger.create_session("t", "a")
    child = ledger.create_session("t", "sub", parent=parent.session)
    assert len(parent.session) == 36
    kids = ledger.children(parent)
    assert [k.id for k in kids] == [child.session]
    ledger.set_status(child, "finished")
    info = ledger.session(child)
    assert info is not None and info.status == "finished" and info.parent == parent.session
    with pytest.raises(UserError):
        ledger.set_status(child, "exploded")
    with pytest.raises(UserError):
        ledger.create_session("other-tenant", "a", parent=parent.session)


def test_failed_step_writes_nothing(ledger: LedgerBackend) -> None:
    # covers: LED-1
    scope = ledger.create_session("t", "a")
    ledger.append(scope, _step(0))

    bad = _step(1)
    with pytest.raises(UserError):
        ledger.append(scope, [bad[0], "not a message"])  # type: ignore[list-item]
    assert len(ledger.entries(scope)) == 2
    info = ledger.session(scope)
    assert info is not None and info.entries == 2
    assert verify(ledger).ok


def test_tail_by_count_and_tokens_keeps_whole_steps(ledger: LedgerBackend) -> None:
    # covers: LED-1, LIM-4
    scope = ledger.create_session("t", "a")
    ledger.append(scope, [Message.user("go")])
    for i in range(20):
        ledger.append(scope, _step(i, "y" * 400))
    assert [e.seq for e in ledger.tail(scope, n=3)] == [38, 39, 40]
    all_entries = ledger.entries(scope)
    budget = sum(e.tokens for e in all_entries[-7:])  # 3.5 steps' worth
    tail = ledger.tail(scope, tokens=budget)
    assert tail[0].seq == tail[0].step, "tail must start at a step boundary"
    assert sum(e.tokens for e in tail) <= budget
    assert len(tail) == 6
    assert ledger.tail(scope, tokens=1) == []


def test_join_step_only_latest(ledger: LedgerBackend) -> None:
    # covers: LED-1
    scope = ledger.create_session("t", "a")
    call = ToolCall("c1", "Read", "{}")
    first = ledger.append(scope, [Message.assistant("", call)])
    assert verify(ledger).paused == (scope.session,)
    ledger.append(scope, [Message.tool("c1", "data")], join_step=first[0].step)
    report = verify(ledger)
    assert report.ok and report.paused == ()
    ledger.append(scope, [Message.user("next")])
    with pytest.raises(LedgerError):
        ledger.append(scope, [Message.tool("c1", "late")], join_step=first[0].step)


def test_search_fts_and_regex(ledger: LedgerBackend) -> None:
    # covers: LED-5
    scope = ledger.create_session("t", "a")
    ledger.append(scope, [Message.user("please fix the parser bug")])
    ledger.append(scope, _step(1, "Traceback: ValueError in parse_header"))
    hits = ledger.search(scope, "ValueError")
    assert [h.seq for h in hits] == [2]
    rx = ledger.search(scope, r"parse_\w+", regex=True)
    assert rx and rx[0].offsets
    with pytest.raises(UserError):
        ledger.search(scope, "(", regex=True)
    ledger.add_record(scope, "summary", "leaf", {"text": "summary about parser"})
    assert ledger.records(scope, "summary")[0].body["text"] == "summary about parser"


def test_usage_and_checkpoints_and_records(ledger: LedgerBackend) -> None:
    # covers: TOK-2, LIM-3, OPS-3
    scope = ledger.create_session("t", "a")
    usage = Usage(new_input=10, cache_read=90, cache_write=None, output=5, reasoning=None)
    entries = ledger.append(scope, _step(0), usage=UsageInput(usage, "m", "anthropic"))
    req = ledger.requests(scope)
    assert req[0].entry_id == entries[0].id and req[0].cache_write is None
    cp = ledger.add_checkpoint(scope, Message.user("state"), first_seq=0, last_seq=1)
    assert ledger.latest_checkpoint(scope) == cp
    with pytest.raises(UserError):
        ledger.add_checkpoint(scope, Message.user("x"), first_seq=0, last_seq=99)
    ledger.add_record(scope, "receipt", "Bash", {"status": "ok"})
    assert [r.kind for r in ledger.records(scope, "receipt")] == ["Bash"]


def test_append_steps_is_all_or_nothing(ledger: LedgerBackend) -> None:
    # covers: LED-1
    scope = ledger.create_session("t", "a")
    steps = [StepInput(_step(i)) for i in range(5)] + [StepInput([])]
    with pytest.raises(UserError):
        ledger.append_steps(scope, steps)
    assert ledger.entries(scope) == []
    assert ledger.append_steps(scope, [StepInput(_step(i)) for i in range(5)]) == 10


def test_a_batch_stores_what_its_steps_appended_one_by_one_store(
    ledger: LedgerBackend,
) -> None:
    # covers: LED-1, LED-6, TOK-2
    # append_steps reads and moves the session's row once for the whole batch and packs its
    # bodies together (on another thread past 32 large ones): the rows must be those the
    # one-step path writes, the seal chain whole, and each step's usage on its own assistant.
    big = "\n".join(f"line {k}: " + "lorem ipsum dolor " * 8 for k in range(40))
    usage = Usage(new_input=10, cache_read=0, cache_write=None, output=5, reasoning=None)
    steps = [
        StepInput(_step(i, big if i % 2 else "out"), (UsageInput(usage, "m", "anthropic"),))
        for i in range(70)
    ]
    one = ledger.create_session("t", "one")
    for s in steps[:3]:
        ledger.append(one, s.messages, usage=s.usages[0])
    ledger.append_steps(one, steps[3:])
    batch = ledger.create_session("t", "batch")
    ledger.append_steps(batch, steps[:1])
    ledger.append_steps(batch, steps[1:])

    def shape(scope: Scope) -> list[tuple[object, ...]]:
        return [(e.seq, e.step, e.role, e.tokens, e.size, e.digest, e.message) for e in
                ledger.entries(scope)]  # fmt: skip

    assert shape(one) == shape(batch) and len(shape(one)) == 140
    for scope in (one, batch):
        entries = {e.id: e for e in ledger.entries(scope)}
        anchors = [entries[r.entry_id].step for r in ledger.requests(scope)]
        assert anchors == [e.step for e in entries.values() if e.role == "assistant"]
        info = ledger.session(scope)
        assert info is not None and info.entries == 140
    assert verify(ledger).ok


def test_verify_detects_tampering(ledger_store: LedgerStore) -> None:
    # covers: LED-6
    with ledger_store.open() as led:
        scope = led.create_session("t", "a")
        led.append(scope, _step(0))
        led.append(scope, [Message.user("after")])
        assert verify(led).ok
    ledger_store.execute("UPDATE entries SET body = replace(body, 'out 0', 'OUT 0') WHERE seq = 1")
    with ledger_store.open() as led:
        report = verify(led)
    assert not report.ok and report.faults[0].kind == "digest" and report.faults[0].seq == 1


def test_verify_detects_split_step(ledger_store: LedgerStore) -> None:
    # covers: LIM-4, LED-1
    with ledger_store.open() as led:
        scope = led.create_session("t", "a")
        led.append(scope, _step(0))
        led.append(scope, [Message.user("after")])
    ledger_store.execute("DELETE FROM entries WHERE seq = 1")
    with ledger_store.open() as led:
        kinds = {f.kind for f in verify(led).faults}
    assert {"gap", "split-step"} <= kinds


def test_newer_schema_is_refused(ledger_store: LedgerStore) -> None:
    # covers: LED-4
    ledger_store.open().close()
    ledger_store.make_newer()
    with pytest.raises(SchemaVersionError, match="upgrade comal"):
        ledger_store.open()


def test_reopening_migrates_nothing_and_keeps_rows(ledger_store: LedgerStore) -> None:
    # covers: LED-4
    with ledger_store.open() as led:
        scope = led.create_session("t", "a")
        led.append(scope, [Message.user("kept")])
    with ledger_store.open() as led:
        assert [e.message for e in led.entries(scope)] == [Message.user("kept")]


def test_nested_atomic_rolls_back_only_the_inner_block(ledger: LedgerBackend) -> None:
    # covers: LED-1
    scope = ledger.create_session("t", "a")
    with ledger.atomic():
        ledger.append(scope, [Message.user("outer")])
        with pytest.raises(UserError), ledger.atomic():
            ledger.append(scope, _step(1))
            ledger.create_session("t", "a", session_id=scope.session)  # clashes: inner undone
        ledger.append(scope, [Message.user("still outer")])
    assert [e.message.text for e in ledger.entries(scope)] == ["outer", "still outer"]
    assert [e.seq for e in ledger.entries(scope)] == [0, 1]
    with pytest.raises(RuntimeError), ledger.atomic():
        ledger.append(scope, [Message.user("lost")])
        raise RuntimeError("abort the whole transaction")
    info = ledger.session(scope)
    assert info is not None and info.entries == 2


def test_resolve_prefix(ledger: LedgerBackend) -> None:
    # covers: LED-3
    scope = ledger.create_session("t", "a", session_id="abc-123")
    ledger.create_session("t", "a", session_id="abd-456")
    assert ledger.resolve("abc") == scope
    with pytest.raises(UserError, match="ambiguous"):
        ledger.resolve("ab")
    with pytest.raises(UserError):
        ledger.resolve("zzz")


def test_lone_surrogates_and_control_bytes_round_trip(ledger: LedgerBackend) -> None:
    # covers: LED-1, LED-6
    scope = ledger.create_session("t", "a")
    weird = "bad \udc80\udcff bytes\x00\x1b[31m 🐍 \u2028 end"
    ledger.append(scope, [Message.user("x")])
    ledger.append(scope, _step(0, weird))
    back = ledger.entries(scope)[2].message.tool_result
    assert back is not None and back.text == f"{weird} 0"
    assert ledger.entries(scope)[2].output_digest == sha256_hex(f"{weird} 0")
    assert [h.seq for h in ledger.search(scope, "bytes")] == [2]
    assert verify(ledger).ok


def test_a_step_is_whole_by_construction(ledger: LedgerBackend) -> None:
    # covers: LIM-4, LED-1
    scope = ledger.create_session("t", "a")
    with pytest.raises(UserError, match="2 steps"):
        ledger.append(scope, [Message.user("x"), *_step(0)])
    with pytest.raises(UserError, match="2 steps"):
        ledger.append(scope, [*_step(0), Message.tool("c9", "orphan")])
    first = ledger.append(scope, [_step(1)[0]])
    with pytest.raises(UserError, match="only tool results"):
        ledger.append(scope, [Message.user("no")], join_step=first[0].step)
    assert len(ledger.entries(scope)) == 1
