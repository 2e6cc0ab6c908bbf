"""Every corpus transcript replayed through the limit engine at 16k, 45k and 128k windows.

At every model call of the original run: the assembly fits the budget or the turn ends in a
coded error; no tool pair is split; the K newest results and every error are sent as stored;
every referenced or checkpointed output reads back exactly through EvidenceRead; assembling
twice gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _context_sessions import read_all
from comal.context import Bounded, Checkpointed, EngineConfig, Referenced, assemble
from comal.importers import load, store
from comal.ledger import SQLiteLedger, open_ledger
from comal.messages import open_calls, orphan_results
from comal.tokens import Budget, EstimatingCounter
from comal.turns import replay
from conftest import corpus_dir

CODED = {"CONTEXT_PRESSURE_LOOP", "CONTEXT_OVERHEAD"}


def _transcripts() -> list[Path]:
    return sorted(
        p
        for p in corpus_dir().rglob("*")
        if p.suffix in {".json", ".jsonl", ".traj"} and "locomo" not in p.parts
    )


@pytest.fixture(scope="module")
def corpus_ledger(tmp_path_factory: pytest.TempPathFactory) -> SQLiteLedger:
    led = open_ledger(tmp_path_factory.mktemp("corpus") / "c.db", counter=EstimatingCounter())
    for path in _transcripts():
        store(led, load(path))
    return led


@pytest.mark.parametrize("window", [16_000, 45_000, 128_000])
def test_every_corpus_transcript_replays_within_budget(
    corpus_ledger: SQLiteLedger, window: int
) -> None:
    # covers: LIM-1, LIM-2, LIM-3, LIM-4, LIM-5, EVI-1, EVI-2
    led = corpus_ledger
    config = EngineConfig(counter=led.counter)
    budget = Budget.for_window(window, system_tokens=0, tools_tokens=0)
    checked: set[tuple[int, str]] = set()
    turns_seen = 0
    for info in led.sessions():
        scope = info.scope
        entries = list(led.iter_entries(scope))
        by_id = {e.id: e for e in entries}
        for turn in replay(entries, scope.session, budget, config):
            turns_seen += 1
            if turn.assembly is None:
                assert turn.error in CODED
                continue
            a = turn.assembly
            assert turn.fits and a.history_tokens <= budget.history_capacity
            assert open_calls(a.messages) == [] and orphan_results(a.messages) == []
            sent = {i: m for i, m in zip(a.entry_ids, a.messages, strict=True) if i is not None}
            bounded = {x.entry_id for x in a.actions if isinstance(x, Bounded)}
            before = [e for e in entries if e.seq < turn.seq and e.message.tool_result]
            referenced = {x.entry_id for x in a.actions if isinstance(x, Referenced)}
            for e in before[-config.keep_recent_results :]:
                # Protected, unless they alone held the history over the threshold: then the
                # older of them may be exact references (read back below), never bounded away.
                if e.id in sent and e.id not in bounded and e.id not in referenced:
                    assert sent[e.id] == e.message
            for e in before:
                result = e.message.tool_result
                if result is not None and result.is_error and e.id in sent:
                    assert e.id in bounded or sent[e.id] == e.message
            for x in a.actions:
                refs: list[tuple[int, str]] = []
                if isinstance(x, Referenced):
                    refs.append((x.entry_id, x.ref.digest))
                    assert x.ref.digest in sent[x.entry_id].text
                    assert str(x.entry_id) in sent[x.entry_id].text
                if isinstance(x, Checkpointed):
                    refs += [
                        (e.id, e.output_digest)
                        for e in entries
                        if x.first_seq <= e.seq <= x.last_seq and e.output_digest
                    ]
                for entry_id, digest in refs:
                    if (entry_id, digest) not in checked:
                        stored = by_id[entry_id].message.tool_result
                        assert stored is not None
                        assert read_all(led, scope, entry_id, "content", digest) == stored.text
                        checked.add((entry_id, digest))
            assert turn.view is not None
            again = assemble(turn.view, budget, config, state=turn.state)
            assert again == a and again.fingerprint() == a.fingerprint()
    assert turns_seen > 500
