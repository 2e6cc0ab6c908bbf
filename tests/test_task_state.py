"""The task's state survives compaction in every engine (ENG-2, issue 33, item 4).

A scripted coordinator states its goal, keeps a board of two items, delegates two work steps,
waits for the first, composes a draft from it, and then reads large files until its engine
compacts. Every request after the first compaction must still hold the operator's
instructions (the system prompt), the goal, the board, both steps (number, child session,
status; the first one's exact ``EvidenceRead`` of its answer; the second as started and not
collected) and the draft."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from _agent_support import reply, rig, settings_for, text, tool
from _work_support import Kids
from comal.context import EngineConfig
from comal.context.dag import DagConfig
from comal.context.pipeline import PipelineConfig
from comal.messages.wire import to_anthropic
from comal.providers import ModelRequest
from comal.testing import FunctionProvider
from comal.tokens import EstimatingCounter
from comal.work import drafts_of, steps_of

GOAL = "Port the tokenizer to Rust; keep a board and delegate the two halves."
OPERATOR = "OPERATOR RULE 7: never push to the main branch."
COUNTER = EstimatingCounter()


def _big(i: int) -> str:
    return "".join(
        f"module{i}.py line {j}: value {(i * 7919 + j * 104729) % 99991}\n" for j in range(70)
    )


def _script(reads: int) -> list[dict[str, Any]]:
    steps = [
        reply(
            tool("b1", "BoardAdd", text="lexer ported"),
            tool("b2", "BoardAdd", text="parser ported"),
        ),
        reply(
            tool("run1", "WorkStepRun", objective="Port the lexer", tools=["Read"]),
            tool("run2", "WorkStepRun", objective="Port the parser", tools=["Read"]),
        ),
        reply(tool("wait1", "WorkStepWait", steps=[1])),
        reply(
            tool("d1", "WorkDraft", title="Port report", parts=[{"text": "Lexer:"}, {"step": 1}])
        ),
    ]
    steps += [reply(tool(f"r{i}", "Read", path=f"big{i}.txt")) for i in range(reads)]
    return [*steps, reply(text("Stopping here."))]


def _engine(name: str) -> BaseModel:
    if name == "dag":
        return DagConfig(counter=COUNTER, defer_compaction=False)
    if name == "pipeline":
        return PipelineConfig(counter=COUNTER)
    return EngineConfig(counter=COUNTER)


def _sent(req: ModelRequest) -> str:
    return req.system + "\n" + json.dumps(to_anthropic(req.messages), ensure_ascii=False)


def _compacted(engine: str, req: ModelRequest) -> bool:
    """Whether the request's messages (not its system prompt, whose clause names the
    summaries' header) carry what the engine's compaction made."""
    mark = {"limit": "[checkpoint", "dag": "[comal summary ", "pipeline": "[Context restored"}
    return mark[engine] in json.dumps(to_anthropic(req.messages), ensure_ascii=False)


@pytest.mark.parametrize(
    ("engine", "window"), [("limit", 8_000), ("dag", 8_000), ("dag", 32_000), ("pipeline", 8_000)]
)
def test_every_request_after_a_compaction_holds_the_task(
    tmp_path: Path, engine: str, window: int
) -> None:
    # covers: ENG-2, BRD-2, WRK-2, WRK-4, LIM-3, DAG-4, PIP-1
    r = rig(tmp_path)
    reads = 10 if window < 16_000 else 30
    for i in range(reads):
        (r.root / f"big{i}.txt").write_text(_big(i))
    script = iter(_script(reads))
    # Past the script (the house asks again while the board is open), it only says it stops.
    provider = FunctionProvider(lambda req: next(script, reply(text("Stopping here."))))
    kids = Kids(
        {
            1: [reply(text("The lexer is ported: 412 lines, tests green."))],
            2: [reply(text("The parser is ported."))],
        }
    )
    settings = settings_for(
        context_window=window,
        engine=_engine(engine),
        engine_name=engine,
        system=OPERATOR,
        max_turns=reads + 8,
    )
    r.agent(provider, children=kids, settings=settings).run(GOAL)
    step1, step2 = steps_of(r.ledger, r.scope)
    (draft,) = drafts_of(r.ledger, r.scope)
    answer = step1.answer_entry
    assert answer is not None
    expected = [
        OPERATOR,
        GOAL,
        "lexer ported",
        "parser ported",
        f"#1 child {step1.delegation.child}",
        f'EvidenceRead(session=\\"{step1.delegation.child}\\", entry={answer}, field=\\"text\\")',
        f"#2 child {step2.delegation.child}",
        "WorkStepWait(steps=[2])",
        f"record {draft.record}, sha256 {draft.sha256}",
    ]
    first = next((n for n, req in enumerate(provider.calls) if _compacted(engine, req)), None)
    assert first is not None, f"{engine} at {window:,} never compacted"
    after = [_sent(req) for req in provider.calls[first:]]
    for n, sent in enumerate(after):
        missing = [e for e in expected if e not in sent]
        assert not missing, f"request {n} after the compaction lacks {missing}"
    events = r.ledger.records(r.scope, "event")
    # covers: LIM-5, PIP-1
    # The dag's fresh tail over the window yields its older steps instead of a pressure loop
    # reported turn after turn, and the pipeline keeps its 5-turn cooldown over the window (it
    # had summarized 13 times in 14 turns at 8k).
    assert not [e for e in events if e.kind == "dag_blocked"]
    summaries = [e for e in events if e.kind == "pipeline_summarized"]
    assert len(summaries) <= 1 + len(provider.calls) // 5
