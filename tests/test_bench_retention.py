"""The retention classifier: verbatim, referenced, recoverable or lost, checked by digest."""

from __future__ import annotations

from comal.bench import Fate, classify_retention, read_back, retention_counts
from comal.bench._strategies import masking_placeholder
from comal.ledger import Entry, Scope, SQLiteLedger
from comal.messages import EvidenceRef, Message, Role, ToolCall, sha256_hex
from comal.messages.wire import render_engine_part


def _session(ledger: SQLiteLedger, outputs: list[str]) -> tuple[Scope, list[Entry]]:
    scope = ledger.create_session("bench", "retention")
    ledger.append(scope, [Message.system("sys")])
    ledger.append(scope, [Message.user("task")])
    for i, out in enumerate(outputs):
        call = ToolCall(f"c{i}", "bash", f'{{"command": "step {i}"}}')
        ledger.append(scope, [Message.assistant("", call), Message.tool(f"c{i}", out)])
    ledger.append(scope, [Message.assistant("done")])
    return scope, list(ledger.iter_entries(scope))


def _results(entries: list[Entry]) -> list[tuple[Entry, str]]:
    return [(e, e.message.tool_result.text) for e in entries if e.message.tool_result is not None]


def _reference(entry: Entry, digest: str) -> Message:
    result = entry.message.tool_result
    assert result is not None
    ref = EvidenceRef(entry.id, "content", digest, 10, 1, "preview")
    return Message.tool(result.call_id, render_engine_part(ref))


def test_each_output_gets_the_first_fate_that_holds(ledger: SQLiteLedger) -> None:
    # covers: LIM-2, LED-6, EVI-1
    scope, entries = _session(ledger, ["one\n", "two\n" * 5_000, "three", "four"])
    results = _results(entries)
    (e1, _), (e2, o2), (e3, _), (e4, _) = results
    request: list[Message] = [entries[0].message, entries[1].message]
    request += [entries[2].message, e1.message]  # verbatim
    request += [entries[4].message, _reference(e2, sha256_hex(o2))]  # exact reference
    request += [entries[6].message, _reference(e3, "0" * 64)]  # a reference to other bytes
    fourth = e4.message.tool_result
    assert fourth is not None
    request += [entries[8].message, Message(Role.TOOL, (masking_placeholder(fourth),))]

    fates = classify_retention(results, request, ledger, scope)
    assert fates == {
        e1.id: Fate.VERBATIM,
        e2.id: Fate.REFERENCED,
        e3.id: Fate.RECOVERABLE,  # the wrong digest does not count, the store still has it
        e4.id: Fate.RECOVERABLE,
    }
    # A strategy that keeps no store loses what it does not send verbatim.
    without = classify_retention(results, request, None, scope)
    assert [without[e.id] for e, _ in results] == [Fate.VERBATIM] + [Fate.LOST] * 3
    assert retention_counts(without) == {
        "verbatim": 1,
        "referenced": 0,
        "recoverable": 0,
        "lost": 3,
    }


def test_a_verbatim_match_needs_the_same_call_and_the_exact_text(ledger: SQLiteLedger) -> None:
    scope, entries = _session(ledger, ["exact output"])
    ((entry, original),) = _results(entries)
    near = Message.tool("c0", original + " ")
    assert classify_retention([(entry, original)], [near], None, scope)[entry.id] is Fate.LOST
    other_call = Message.tool("elsewhere", original)
    assert classify_retention([(entry, original)], [other_call], None, scope)[entry.id] is Fate.LOST


def test_recoverable_means_the_store_gives_the_original_back(ledger: SQLiteLedger) -> None:
    # covers: EVI-1, EVI-3
    big = "".join(f"line {i} é 😀\n" for i in range(3_000))  # several 8,000-unit pages
    scope, entries = _session(ledger, [big])
    ((entry, original),) = _results(entries)
    assert read_back(ledger, scope, entry.id, sha256_hex(original)) == original
    assert read_back(ledger, scope, entry.id, "0" * 64) is None
    # The transcript said something else than the store holds: not recoverable.
    fates = classify_retention([(entry, original + "!")], [], ledger, scope)
    assert fates[entry.id] is Fate.LOST
