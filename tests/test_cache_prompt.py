"""CCH-1: a static system prompt, a dynamic preamble, and the cache-break detector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _cache_support import (
    MODEL,
    answer,
    bash,
    claude,
    day,
    events,
    exact,
    frozen,
    runtime,
    unmarked,
)
from comal.agent import CACHE_BREAK_EVENT, CACHE_EDIT_EVENT, Config, Flags, Runtime
from comal.agent._cache import CacheWatch, Finding, Prefix, explain
from comal.context import Assembly, Metrics, Referenced
from comal.ledger import open_ledger
from comal.messages import EvidenceRef, Message
from comal.providers import ModelRequest
from comal.testing import FakeServer, FunctionProvider

# covers: CCH-1


def test_system_and_tools_are_byte_identical_across_turns_days_and_sessions(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = [
        bash("c1", "echo one"),
        answer("first done"),
        bash("c2", "echo two"),
        answer("second done"),
        answer("third done"),
    ]
    led = open_ledger(tmp_path / "l.db")
    with FakeServer(script) as server, claude(server) as provider:
        first = runtime(led, ws, provider, clock=frozen(day(5)))
        assert first.run("first task").status == "finished"
        assert first.run("second task").status == "finished"  # same session, a later turn
        # Another process on another day, another session of the same agent.
        second = runtime(led, ws, provider, clock=frozen(day(6, 17)))
        assert second.run("third task").status == "finished"
        bodies = [r.body for r in server.requests]
    assert len(bodies) == 5 and first.scope != second.scope
    systems = {exact(unmarked(b["system"])) for b in bodies}
    tools = {exact(unmarked(b["tools"])) for b in bodies}
    assert len(systems) == 1 and len(tools) == 1
    # With their breakpoints too, while the TTL is the same (it moves once, CCH-4).
    by_ttl: dict[str, set[str]] = {}
    for b in bodies:
        ttl = b["system"][-1]["cache_control"].get("ttl", "")
        by_ttl.setdefault(ttl, set()).add(exact([b["system"], b["tools"]]))
    assert all(len(v) == 1 for v in by_ttl.values())
    # The time, the sender and the workspace travel in the user message, not in the system.
    text = exact(bodies)
    assert "2026-01-05 09:00 UTC" in text and "2026-01-06 17:00 UTC" in text
    system = bodies[0]["system"][0]["text"]
    assert "2026" not in system and str(ws) not in system
    first_user = bodies[0]["messages"][0]["content"][0]["text"]
    assert first_user.startswith("<context>") and "date: 2026-01-05 09:00 UTC" in first_user
    assert f"sender: {first.user}" in first_user
    # Each request repeats the previous one's messages of its session, byte for byte.
    for before, after in ((bodies[0], bodies[1]), (bodies[1], bodies[2]), (bodies[2], bodies[3])):
        n = len(before["messages"])
        assert exact(unmarked(after["messages"][:n])) == exact(unmarked(before["messages"]))
    for scope in (first.scope, second.scope):
        assert scope is not None
        assert events(led, scope, CACHE_BREAK_EVENT) == []
    led.close()


def _prefix(messages: list[Message], *, system: str = "sys", tools: str = "t") -> Prefix:
    return Prefix.of(MODEL, system, tools, messages, list(range(len(messages))), {})


def test_the_detector_names_the_first_differing_part() -> None:
    history = [Message.user("a"), Message.assistant("b"), Message.user("c")]
    watch = CacheWatch()
    first = _prefix(history)
    assert watch.compare(first) is None  # nothing to compare with yet
    watch.accept(first)
    # Appending is not a break: the previous prefix is repeated whole.
    grown = _prefix([*history, Message.assistant("d")], tools="t")
    assert watch.compare(grown) is None
    changed = _prefix([history[0], Message.assistant("B"), history[2]])
    found = watch.compare(changed)
    assert found is not None and (found.part, found.entry_id) == ("message 1", 1)
    assert watch.compare(_prefix(history, system="sys 2026-01-06")).part == "system"  # type: ignore[union-attr]
    assert watch.compare(_prefix(history, tools="t2")).part == "tools"  # type: ignore[union-attr]
    kind, body = found.event(at_seq=9)
    assert kind == CACHE_BREAK_EVENT
    assert body == {"v": 1, "at_seq": 9, "part": "message 1", "message": 1, "entry_id": 1}


@pytest.mark.parametrize("n", [1, 2, 7, 40, 300])
def test_a_resumed_process_finds_the_break_from_the_compact_form(n: int) -> None:
    history = [
        Message.user(f"m{i}") if i % 2 == 0 else Message.assistant(f"m{i}") for i in range(n)
    ]
    meta = {"prefix": _prefix(history).compact()}
    assert len(meta["prefix"]["marks"]) <= 2 * (n + 2).bit_length() + 2  # O(log n), not O(n)
    fresh = CacheWatch()
    assert fresh.compare(_prefix([*history, Message.user("new")]), meta) is None
    for at in sorted({0, n // 2, n - 1}):
        edited = list(history)
        edited[at] = Message.user("edited")
        found = fresh.compare(_prefix(edited), meta)
        assert found is not None
        # The break is at or after the reported part and within its range.
        assert found.index <= at + 2 <= found.upto
        if at == n - 1:
            assert found.index == found.upto == at + 2  # exact near the end
    assert fresh.compare(_prefix(history, system="other"), meta).part == "system"  # type: ignore[union-attr]


def _assembly(messages: list[Message], ids: list[int | None], actions: tuple[Any, ...]) -> Assembly:
    metrics = Metrics(0, 0, 0, 0, 0, 0.0, 0, 0, 0)
    return Assembly(tuple(messages), tuple(ids), 0, {}, actions, metrics, checkpoint_to_store=None)


def test_an_engine_edit_announces_the_break_it_makes() -> None:
    ref = EvidenceRef(11, "output", "0" * 64, 1, 1, "x")
    new = Referenced(11, 1, 500, 20, ref, decided_at=9)
    old = Referenced(11, 1, 500, 20, ref, decided_at=3)
    finding = Finding(3, 3, 11)
    msgs = [Message.system("s"), Message.user("u"), Message.assistant("r")]
    announced = explain(
        finding, assembly=_assembly(msgs, [None, 10, 11], (new,)), since=5, entries={}
    )
    assert announced.announced and announced.reason == "new referenced"
    assert announced.event(12)[0] == CACHE_EDIT_EVENT
    # A reference decided before the previous request explains nothing new.
    silent = explain(finding, assembly=_assembly(msgs, [None, 10, 11], (old,)), since=5, entries={})
    assert not silent.announced
    stored = explain(
        finding,
        assembly=_assembly(msgs, [None, 10, 11], ()),
        since=5,
        entries={},
        checkpoint_stored=True,
    )
    assert stored.reason == "checkpoint stored"
    tools = explain(
        Finding(1, 1, None),
        assembly=_assembly(msgs, [None, 10, 11], ()),
        since=5,
        entries={},
        tools_change="tools discovered mcp__x",
    )
    assert tools.reason == "tools discovered mcp__x"


def test_compaction_under_a_small_window_breaks_only_announced(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    steps = 14

    def model(request: ModelRequest) -> dict[str, Any]:
        n = len(calls) + 1
        calls.append(request)
        if n > steps:
            return {"content": [{"type": "text", "text": "done"}]}
        return bash(f"c{n}", f"seq {n * 700}")

    calls: list[ModelRequest] = []
    led = open_ledger(tmp_path / "l.db")
    flags = Flags(model=f"anthropic:{MODEL}", context_window=8_000, workspace=ws, mode="trusted")
    rt = Runtime.open(led, flags, config=Config(), provider=FunctionProvider(model))
    assert rt.run("count a lot").status == "finished"
    assert rt.scope is not None and led.checkpoints(rt.scope)  # the engine had to work
    edits = events(led, rt.scope, CACHE_EDIT_EVENT)
    assert events(led, rt.scope, CACHE_BREAK_EVENT) == []
    assert edits and all(e["reason"] for e in edits)
    assert any(e["reason"] == "checkpoint stored" for e in edits)
    # Every request's meta carries the compact prefix a resumed process compares with.
    assert all("prefix" in r.meta for r in led.requests(rt.scope))
    led.close()


def test_an_unannounced_change_is_a_cache_break(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    led = open_ledger(tmp_path / "l.db")
    with FakeServer([answer("one"), answer("two")]) as server, claude(server) as provider:
        first = runtime(led, ws, provider)
        assert first.run("hello").status == "finished"
        assert first.scope is not None
        # A new process whose system prompt carries the date: exactly what CCH-1 forbids.
        dated = Config(system_prompt="You are comal. Today is 2026-01-06.")
        again = runtime(led, ws, provider, resume=first.scope.session, config=dated)
        assert again.run("and again").status == "finished"
    breaks = events(led, first.scope, CACHE_BREAK_EVENT)
    assert [b["part"] for b in breaks] == ["system"]
    led.close()
