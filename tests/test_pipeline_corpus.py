"""Every corpus transcript replayed through the pipeline engine at 16k, 45k and 128k windows,
maintenance (summaries) run in memory between calls as an agent with inline compaction would.

At every model call: the request fits or the turn ends in a coded error; no tool pair is split;
every placeholder's, offloaded result's and summary reference's recovery call returns the
original bytes (digest equal); assembling the same view again, with a cold cache, gives the same
bytes; and the request repeats the previous one byte for byte up to the previous cache fence,
except where it announces a rebase (then up to what the announcement says stayed).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from _pipeline_support import common_messages, pairs_whole, read_back
from comal.context import Assembly, EngineCache, get_engine
from comal.context.pipeline import Offloaded, PipelineConfig, Placeholdered, Rebased
from comal.importers import load, store
from comal.ledger import SQLiteLedger, open_ledger
from comal.messages import Summary
from comal.tokens import Budget, EstimatingCounter
from comal.turns import replay
from conftest import corpus_dir

CODED = {"CONTEXT_PRESSURE_LOOP", "CONTEXT_OVERHEAD"}
ENGINE = get_engine("pipeline")
_CALL = re.compile(
    r'EvidenceRead\(entry=\d+, field="[a-z\[\]0-9]+", expected_digest="[0-9a-f]{64}"\)'
)


def _transcripts() -> list[Path]:
    return sorted(p for p in corpus_dir().rglob("*") if p.suffix in {".json", ".jsonl", ".traj"})


@pytest.fixture(scope="module")
def corpus_ledger(tmp_path_factory: pytest.TempPathFactory) -> SQLiteLedger:
    led = open_ledger(tmp_path_factory.mktemp("corpus") / "c.db", counter=EstimatingCounter())
    for path in _transcripts():
        store(led, load(path))
    return led


def _recoveries(a: Assembly) -> list[str]:
    calls = [x.recovery for x in a.actions if isinstance(x, (Placeholdered, Offloaded))]
    for m in a.messages:
        for part in m.parts:
            if isinstance(part, Summary):
                calls += _CALL.findall(part.text)
    return calls


@pytest.mark.parametrize("window", [16_000, 45_000, 128_000])
def test_every_corpus_transcript_replays_through_the_pipeline(
    corpus_ledger: SQLiteLedger, window: int
) -> None:
    # covers: PIP-1, PIP-2, PIP-4, LIM-4, EVI-1, OBS-1
    led = corpus_ledger
    config = PipelineConfig(counter=led.counter)
    budget = Budget.for_window(window, system_tokens=0, tools_tokens=0)
    checked: set[str] = set()
    seen: Counter[str] = Counter()
    breaks: list[tuple[str, int, str]] = []
    for info in led.sessions():
        scope = info.scope
        entries = list(led.iter_entries(scope))
        previous: Assembly | None = None
        for turn in replay(
            entries, scope.session, budget, config, engine=ENGINE,
            cache=EngineCache(),
        ):  # fmt: skip
            seen["turns"] += 1
            if turn.assembly is None:
                assert turn.error in CODED
                previous = None
                continue
            a = turn.assembly
            assert turn.fits and a.history_tokens <= budget.history_capacity
            assert pairs_whole(a.messages)
            for call in _recoveries(a):
                if call not in checked:
                    checked.add(call)
                    read_back(led, scope, call)  # digest-checked page by page, then whole
            assert turn.view is not None
            again = ENGINE.assemble(turn.view, budget, config)  # a cold cache
            assert again == a and again.fingerprint() == a.fingerprint()
            if previous is not None:
                shared = common_messages(previous.messages, a.messages)
                rebases = [x for x in a.actions if isinstance(x, Rebased)]
                if rebases:
                    assert shared >= min(r.stable_messages for r in rebases)
                    breaks.append((info.id[:8], turn.turn, ",".join(r.reason for r in rebases)))
                else:
                    assert shared >= int(previous.breakdown["cache_fence"])
            seen["summaries"] += len(turn.made)
            previous = a
    assert seen["turns"] > 1_000 and len(checked) > 0
    by_reason = Counter(reason for _, _, reason in breaks)
    print(f"\n{window:,}: {seen['turns']} calls, {seen['summaries']} summaries, {len(checked)} "
          f"recovery calls read back; announced rebases {dict(by_reason)}")  # fmt: skip
