"""Sessions on every backend: ids that are refused, a session and its first messages in one
transaction (also across a SIGKILL), imported start times and status, the workspace, rename, and
delete — the only deletion there is, recorded by a tombstone that keeps ``verify`` clean."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _pg_support import LedgerStore, url_with_schema
from comal.errors import UserError
from comal.importers import ImportedSession, store
from comal.ledger import (
    InvalidIdentifier,
    LedgerBackend,
    LedgerRowDamaged,
    Scope,
    SessionHasChildren,
    UsageInput,
    verify,
)
from comal.messages import Message, ToolCall
from comal.tokens import Usage


@pytest.fixture
def ledger(any_ledger: LedgerBackend) -> Iterator[LedgerBackend]:
    yield any_ledger


def _step(i: int, output: str = "out") -> list[Message]:
    call = ToolCall(f"c{i}", "Bash", f'{{"command": "echo {i}"}}')
    return [Message.assistant(f"step {i}", call), Message.tool(f"c{i}", f"{output} {i}")]


@pytest.mark.parametrize(
    "bad",
    ["", " ", "\t\n", "\u3000", " acme", "acme ", "ac\x00me", "ac\x1bme", "a\u202eb", "x" * 300],
)
def test_blank_padded_or_control_ids_are_refused(ledger: LedgerBackend, bad: str) -> None:
    # covers: LED-2, LED-3
    for tenant, agent, sid in ((bad, "a", None), ("t", bad, None), ("t", "a", bad)):
        with pytest.raises(InvalidIdentifier) as err:
            ledger.create_session(tenant, agent, session_id=sid)
        assert err.value.code == "LEDGER_BAD_ID"
    assert ledger.sessions() == []


def test_session_and_first_messages_are_one_transaction(ledger: LedgerBackend) -> None:
    # covers: LED-1, RES-1
    scope = ledger.create_session("t", "a", messages=[Message.user("go"), *_step(0)])
    assert [e.seq for e in ledger.entries(scope)] == [0, 1, 2]
    assert [e.step for e in ledger.entries(scope)] == [0, 1, 1]
    with pytest.raises(UserError):
        ledger.create_session("t", "a", session_id="half", messages=[Message.user("x"), "no"])  # type: ignore[list-item]
    assert ledger.session(Scope("t", "a", "half")) is None
    # The documented alternative: atomic() around create_session and append, on both backends.
    with pytest.raises(RuntimeError), ledger.atomic():
        s = ledger.create_session("t", "a", session_id="both")
        ledger.append(s, [Message.user("prompt")])
        raise RuntimeError("crash between the two")
    assert ledger.session(Scope("t", "a", "both")) is None


_KILLED = """
import sys, time
from comal.ledger import open_ledger
from comal.messages import Message
led = open_ledger(sys.argv[1], schema=None)
with led.atomic():
    scope = led.create_session("t", "a", session_id="killed")
    print("between", flush=True)
    time.sleep(60)
    led.append(scope, [Message.user("prompt")])
"""


def test_a_kill_between_session_and_prompt_leaves_neither(ledger_store: LedgerStore) -> None:
    # covers: RES-1, LED-1
    with ledger_store.open() as led:
        target = getattr(led, "path", None) or url_with_schema(led.url, led.schema)  # type: ignore[union-attr]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent / "src"))
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED, target], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"between"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    with ledger_store.open() as led:
        assert led.session(Scope("t", "a", "killed")) is None
        assert verify(led).ok


def test_imports_keep_their_own_start_and_status(ledger: LedgerBackend) -> None:
    # covers: LED-3
    scope = ledger.create_session(
        "t", "a", created_at="2024-03-01T10:00:00+02:00", status="finished", meta={"k": 1}
    )
    info = ledger.session(scope)
    assert info is not None
    assert (info.created_at, info.status) == ("2024-03-01T08:00:00.000000+00:00", "finished")
    with pytest.raises(UserError, match="ISO time"):
        ledger.create_session("t", "a", created_at="yesterday")
    with pytest.raises(UserError, match="status"):
        ledger.create_session("t", "a", status="paused")


def test_the_workspace_reads_back(ledger: LedgerBackend) -> None:
    # covers: RES-6
    scope = ledger.create_session("t", "a", meta={"workspace": "/srv/project", "model": "m"})
    info = ledger.session(scope)
    assert info is not None and info.workspace == "/srv/project"
    other = ledger.session(ledger.create_session("t", "a"))
    assert other is not None and other.workspace is None


def test_rename_reseals_and_refuses_a_damaged_row(
    ledger_store: LedgerStore, ledger: LedgerBackend
) -> None:
    # covers: LED-3, LED-6
    scope = ledger.create_session("t", "a", title="old")
    ledger.rename_session(scope, "new ✓")
    ledger.set_status(scope, "finished")
    info = ledger.session(scope)
    assert info is not None and (info.title, info.status) == ("new ✓", "finished")
    ledger.rename_session(scope, None)
    assert verify(ledger).ok
    with pytest.raises(UserError):
        ledger.rename_session(Scope("t", "other", scope.session), "x")
    ledger_store.execute("UPDATE sessions SET source = 'forged'")
    with pytest.raises(LedgerRowDamaged):
        ledger.rename_session(scope, "launder")  # resealing would hide the forgery


def test_delete_removes_every_row_and_leaves_a_tombstone(ledger: LedgerBackend) -> None:
    # covers: LED-1, LED-3
    keep = ledger.create_session("t", "a", title="keep")
    ledger.append(keep, [Message.user("needle kept")])
    gone = ledger.create_session("t", "a", title="gone")
    ledger.append(gone, [Message.user("needle gone")])
    usage = UsageInput(Usage(10, 0, 0, 5, None), "m", "p", {"run": "r", "at": "2025-01-01T00:00Z"})
    for i in range(3):
        ledger.append(gone, _step(i), usage=usage)
    ledger.search(gone, "needle")  # index it first, so the index must forget it too
    ledger.add_checkpoint(gone, Message.user("state"), first_seq=0, last_seq=2)
    ledger.add_record(gone, "receipt", "Bash", {"status": "ok"})
    ledger.add_record(gone, "summary", "leaf", {"text": "needle summary"})
    before = ledger.session(gone)
    assert before is not None
    tomb = ledger.delete_session(gone, by="operator:test")
    assert tomb.session == gone.session and tomb.deleted_by == "operator:test"
    own = {"entries": 7, "requests": 3, "checkpoints": 1, "records": 2}
    assert {k: tomb.rows[k] for k in own} == own
    # Later tables keyed by session (the dag engine's) are counted too, here all empty.
    assert all(v == 0 for k, v in tomb.rows.items() if k not in own)
    assert (tomb.entries, tomb.tokens, tomb.title) == (7, before.tokens, "gone")
    assert len(tomb.digest) == 64
    assert ledger.session(gone) is None and ledger.entries(gone) == []
    assert ledger.requests(gone) == [] and ledger.spend("t", run="r") == 0
    assert [h.seq for h in ledger.search(keep, "needle")] == [0]
    assert ledger.deletions() == [tomb] and ledger.deletions(tenant="x") == []
    report = verify(ledger, search=True)
    assert report.ok, report.faults
    assert report.rows["deletions"] == 1
    with pytest.raises(UserError):
        ledger.delete_session(gone)


def test_delete_with_children_is_explicit(ledger: LedgerBackend) -> None:
    # covers: LED-3
    parent = ledger.create_session("t", "a")
    child = ledger.create_session("t", "sub", parent=parent.session)
    grandchild = ledger.create_session("t", "sub", parent=child.session)
    ledger.append(grandchild, [Message.user("deep")])
    with pytest.raises(SessionHasChildren) as err:
        ledger.delete_session(parent)
    assert err.value.code == "LEDGER_HAS_CHILDREN" and child.session in str(err.value)
    assert ledger.session(parent) is not None
    ledger.delete_session(parent, children=True)
    assert ledger.sessions() == []
    assert {d.session for d in ledger.deletions()} == {
        parent.session,
        child.session,
        grandchild.session,
    }
    assert verify(ledger).ok


def test_delete_of_a_damaged_session_still_works(
    ledger_store: LedgerStore, ledger: LedgerBackend
) -> None:
    # covers: LED-6
    scope = ledger.create_session("t", "a")
    ledger.append(scope, [Message.user("indexed text")])
    ledger.search(scope, "indexed")
    ledger.add_record(scope, "summary", "leaf", {"text": "summary text"})
    other = ledger.create_session("t", "a")
    ledger.append(other, [Message.user("indexed elsewhere")])
    ledger.add_record(other, "summary", "leaf", {"text": "summary elsewhere"})
    ledger_store.execute("UPDATE entries SET body = replace(body, 'indexed text', 'INDEXED text')")
    assert not verify(ledger).ok
    ledger.delete_session(scope)
    report = verify(ledger, search=True)
    assert report.ok, report.faults
    assert [h.seq for h in ledger.search(other, "indexed")] == [0]


def test_imported_sessions_are_finished_history(ledger: LedgerBackend) -> None:
    # covers: LED-3
    imported = ImportedSession(
        "/t/a.jsonl", "plain", "k", "a title", (Message.user("then"),), (),
        {"started_at": "2023-05-06T07:08:09Z", "skipped_records": 0, "closed_calls": 0},
    )  # fmt: skip
    stored = store(ledger, [imported], digest="d" * 64)
    info = ledger.session(Scope("local", "plain", stored[0].session))
    assert info is not None
    assert (info.status, info.created_at) == ("finished", "2023-05-06T07:08:09.000000+00:00")
    undated = ImportedSession("/t/b.jsonl", "plain", "k2", None, (Message.user("x"),), (),
                              {"started_at": "not a time"})  # fmt: skip
    later = store(ledger, [undated], digest="e" * 64)
    info = ledger.session(Scope("local", "plain", later[0].session))
    assert info is not None and info.created_at > "2024"
