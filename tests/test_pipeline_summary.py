"""The pipeline's summary layer end to end against a real ledger: planned as a job above 85 %,
executed with the three-level fallback, stored as a checkpoint the view reads back behind the
head (middle-out), a cooldown between summaries, and the context restored after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from _pipeline_support import (
    ENGINE,
    Session,
    bash,
    budget,
    cfg,
    common_messages,
    encoded,
    lines,
    pairs_whole,
    read,
    read_back,
)
from comal.compaction import execute
from comal.context import SummaryRequest, SummaryText, View
from comal.context.pipeline import (
    PIPELINE_ENGINE,
    PipelineSummarize,
    Rebased,
    Restored,
    Summarized,
)
from comal.messages import Role, Summary

WINDOW = 16_000


def _grow_until_summary(s: Session, config: object = None, *, limit: int = 80) -> int:
    """Steps until the engine plans a summary after a turn; returns the steps taken."""
    for n in range(limit):
        s.step(f"step {n}", bash(f"python job.py --case {n}", lines(n, 14)))
        view = s.view()
        if ENGINE.plan(view, budget(WINDOW), config or cfg()):
            return n + 1
    raise AssertionError("no summary was planned")


def test_a_summary_is_planned_over_the_trigger_and_keeps_the_head(tmp_path: Path) -> None:
    # covers: PIP-1, PIP-4
    s = Session.new(tmp_path / "s.db")
    s.user("task: fix the parser in src/parse.py")
    s.step("look", read("src/parse.py", lines(0, 20)))
    _grow_until_summary(s)
    before = s.assemble(WINDOW)
    total = int(before.breakdown["total_input_tokens"])
    assert total > 0.85 * budget(WINDOW).input_limit
    (job,) = ENGINE.plan(s.view(), budget(WINDOW), cfg())
    assert isinstance(job, PipelineSummarize) and job.keeps_head
    head = int(before.breakdown["head_entries"])
    assert head >= 1 and job.first_seq == s.entries[head].seq
    (record,) = s.maintain(WINDOW)
    assert record.meta["engine"] == PIPELINE_ENGINE and record.meta["keeps_head"] is True  # type: ignore[attr-defined]
    view = s.view()
    assert [e.id for e in view.head] == [e.id for e in s.entries[:head]]
    after = s.assemble(WINDOW)
    assert after.history_tokens < before.history_tokens and pairs_whole(after.messages)
    # system + head byte for byte: the cached prefix survives the summary (PIP-4).
    assert common_messages(before.messages, after.messages) >= 1 + head
    assert encoded(after.messages[1 : 1 + head]) == encoded(e.message for e in s.entries[:head])
    (summarized,) = [x for x in after.actions if isinstance(x, Summarized)]
    assert summarized.new and summarized.head_entries == head
    (rebased,) = [x for x in after.actions if isinstance(x, Rebased)]
    assert rebased.reason == "summary" and rebased.stable_messages == 1 + head
    summary = after.messages[1 + head]
    assert summary.role is Role.USER and isinstance(summary.parts[0], Summary)
    assert summary.text.startswith(f"[comal pipeline summary of entries seq {job.first_seq}..")
    # The next turn repeats it byte for byte and says it is not new.
    s.step("more", bash("python job.py --next", "ok"))
    again = s.assemble(WINDOW)
    assert encoded(again.messages[: len(after.messages)]) == encoded(after.messages)
    assert not any(x.new for x in again.actions if isinstance(x, Summarized))


def test_the_cooldown_waits_five_turns_and_the_next_summary_folds_the_last(
    tmp_path: Path,
) -> None:
    # covers: PIP-1
    s = Session.new(tmp_path / "s.db")
    s.user("task")
    _grow_until_summary(s)
    (first,) = s.maintain(WINDOW)
    config = cfg()
    waited = 0
    pressed = False
    while True:
        s.step(f"later {waited}", bash(f"python job.py --later {waited}", lines(waited, 130)))
        waited += 1
        jobs = ENGINE.plan(s.view(), budget(WINDOW), config)
        if waited < 5:
            assert jobs == ()  # over the trigger or not, five turns pass first
            a = ENGINE.assemble(s.view(), budget(WINDOW), config)
            total = int(a.breakdown["total_input_tokens"])
            pressed = pressed or total > 0.85 * budget(WINDOW).input_limit
        elif jobs:
            break
        assert waited < 60, "no second summary"
    assert pressed  # the trigger was crossed inside the cooldown, and it held
    (job,) = jobs
    assert isinstance(job, PipelineSummarize)
    assert job.first_seq == first.first_seq and job.previous  # type: ignore[attr-defined]
    (second,) = execute(s.ledger, s.scope, jobs)
    assert second.last_seq > first.last_seq  # type: ignore[attr-defined]


class Scripted:
    """A summarizer that fails or succeeds per level, recording what it was asked."""

    name = "scripted"

    def __init__(self, **answers: str | None) -> None:
        self.answers = answers
        self.asked: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryText:
        self.asked.append(request)
        answer = self.answers.get(request.level.replace("-", "_"))
        if answer is None:
            raise RuntimeError(f"{request.level} failed")
        return SummaryText(answer, "scripted:model", 100, 20)


@pytest.mark.parametrize(
    ("answers", "level"),
    [
        ({"normal": "All good: the parser was fixed."}, "normal"),
        ({"aggressive": "Short: parser fixed."}, "aggressive"),
        ({"normal": "x " * 20_000, "aggressive": "Short."}, "aggressive"),
        ({}, "count-only"),
    ],
)
def test_the_summary_falls_back_level_by_level(
    tmp_path: Path, answers: dict[str, str], level: str
) -> None:
    # covers: PIP-1
    s = Session.new(tmp_path / "s.db")
    s.user("task")
    _grow_until_summary(s)
    jobs = ENGINE.plan(s.view(), budget(WINDOW), cfg())
    summarizer = Scripted(**answers)
    (record,) = execute(s.ledger, s.scope, jobs, summarizer=summarizer)
    meta = record.meta  # type: ignore[attr-defined]
    assert meta["level"] == level
    assert len(meta.get("fallbacks", [])) == {"normal": 0, "aggressive": 1, "count-only": 2}[level]
    if level == "aggressive":
        simplified = summarizer.asked[-1].sources.splitlines()
        assert all(len(line) < 400 for line in simplified)  # oversized content left out
    text = record.message.text  # type: ignore[attr-defined]
    # The header comes from the job, whatever the body says.
    assert text.startswith(f"[comal pipeline summary of entries seq {jobs[0].first_seq}..")  # type: ignore[attr-defined]
    assert f"level {level}" in text.splitlines()[0]
    a = s.assemble(WINDOW)
    assert a.history_tokens <= budget(WINDOW).history_capacity


def test_context_is_restored_after_a_summary(tmp_path: Path) -> None:
    # covers: PIP-1
    instructions = "Run the tests before you finish.\nNever edit vendored code."
    config = cfg(instructions=instructions, instructions_source="AGENTS.md")
    s = Session.new(tmp_path / "s.db")
    s.user("task: fix parse.py")
    s.step("think")
    s.user("also look at lexer.py")
    s.step("ok")
    s.user("and the modules")  # the third user turn: after the head
    for n in range(6):
        s.step(f"read {n}", read(f"src/m{n}.py", lines(n, 14)))
    _grow_until_summary(s, config)
    s.maintain(WINDOW, config)
    a = s.assemble(WINDOW, config)
    (restored,) = [x for x in a.actions if isinstance(x, Restored)]
    assert restored.instructions_chars == len(instructions) and restored.files > 0
    at = next(i for i, m in enumerate(a.messages) if isinstance(m.parts[0], Summary)) + 1
    text = a.messages[at].text
    assert f"Instructions from AGENTS.md, re-injected as written:\n{instructions}" in text
    assert "Resume: continue the task" in text
    assert "src/m5.py: read at seq" in text
    call = text.split("src/m5.py: read at seq", 1)[1].split("the content read then: ", 1)[1]
    call = call.split("\n", 1)[0]
    m5 = next(e for e in s.entries if e.message.tool_result and "5:0 " in e.message.text)
    assert read_back(s.ledger, s.scope, call) == m5.message.tool_result.text  # type: ignore[union-attr]


def test_a_long_run_after_the_last_request_quotes_it_in_the_restore(tmp_path: Path) -> None:
    # covers: PIP-1
    s = Session.new(tmp_path / "s.db")
    s.user("first")
    s.step("ok")
    s.user("second")
    s.step("ok")
    newest = s.user("third request: rename every helper")
    _grow_until_summary(s)
    (job,) = ENGINE.plan(s.view(), budget(WINDOW), cfg())
    assert isinstance(job, PipelineSummarize)
    assert job.restore.request is not None and job.restore.request.entry_id == newest.id
    s.maintain(WINDOW)
    a = s.assemble(WINDOW)
    assert "third request: rename every helper" in "\n".join(m.text for m in a.messages)


def test_views_read_the_head_back_in_front_of_a_keeps_head_checkpoint(tmp_path: Path) -> None:
    # covers: PIP-4
    s = Session.new(tmp_path / "s.db")
    s.user("task")
    _grow_until_summary(s)
    (record,) = s.maintain(WINDOW)
    entries = s.ledger.entries(s.scope)
    from_ledger = View.from_ledger(s.ledger, s.scope, bases=ENGINE.bases)
    in_memory = View.from_entries(entries, s.scope.session, checkpoint=record)  # type: ignore[arg-type]
    assert from_ledger == in_memory
    assert from_ledger.head and all(e.seq < record.first_seq for e in from_ledger.head)  # type: ignore[attr-defined]
    assert from_ledger.entries[0].seq == record.last_seq + 1  # type: ignore[attr-defined]


def test_compact_forces_a_summary_under_the_trigger(tmp_path: Path) -> None:
    # covers: PIP-1
    s = Session.new(tmp_path / "s.db")
    for n in range(4):
        s.user(f"request {n}")
        for k in range(4):
            s.step(f"s{n}.{k}", bash(f"python a.py {n} {k}", lines(n, 5)))
    assert ENGINE.plan(s.view(), budget(128_000), cfg()) == ()
    (job,) = ENGINE.plan(s.view(), budget(128_000), cfg(), force=True)
    assert isinstance(job, PipelineSummarize) and job.reason == "forced"
    # The head (two user turns) stays; the newest request's turn stays verbatim.
    third, fourth = (next(e for e in s.entries if e.message.text == f"request {n}") for n in (2, 3))
    assert (job.first_seq, job.last_seq) == (third.seq, fourth.seq - 1)
