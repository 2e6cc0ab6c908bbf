"""The pipeline engine's layers one by one: what each removes, what it must never touch, and
its metric; then their order."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from _pipeline_support import (
    Session,
    bash,
    cfg,
    common_messages,
    encoded,
    lines,
    pairs_whole,
    read,
    read_back,
    tail_of,
)
from comal.context import ProtectedTailOverflow
from comal.context.pipeline import (
    Cut,
    LayerReport,
    Offloaded,
    Placeholdered,
    Rebased,
    Reread,
    TagsStripped,
    ThinkingCleared,
    Windowed,
    command_is_read_only,
    layer_names,
)
from comal.context.pipeline._timeline import masking_periods
from comal.errors import BudgetError
from comal.messages import Message, Reasoning, Role, Text

NO_HEAD = {"compaction_prefix_anchor_turns": 0}


def _report(assembly: object, layer: str) -> LayerReport:
    return next(a for a in assembly.actions if isinstance(a, LayerReport) and a.layer == layer)  # type: ignore[attr-defined]


def _sent(assembly: object) -> dict[int, Message]:
    return dict(tail_of(assembly))  # type: ignore[arg-type]


def test_layer_1_clears_thinking_outside_the_kept_turns(tmp_path: Path) -> None:
    # covers: PIP-1, OBS-1
    s = Session.new(tmp_path / "t.db")
    s.user("task")
    for n in range(14):
        s.step(f"step {n}", bash(f"echo {n}", f"out {n}"), reasoning=f"thinking {n}")
    a = s.assemble(128_000, cfg(**NO_HEAD))
    sent = _sent(a)
    assistants = [e for e in s.entries if e.role == "assistant"]
    for e in assistants[-10:]:
        assert sent[e.id] == e.message  # kept turns: reasoning and its signature byte for byte
    for e in assistants[:4]:
        m = sent[e.id]
        assert not any(isinstance(p, Reasoning) for p in m.parts)
        assert m.parts == tuple(p for p in e.message.parts if not isinstance(p, Reasoning))
    for e in s.entries:
        if e.role != "assistant":
            assert sent[e.id] == e.message  # never a user message or a tool result
    assert a.metrics.thinking_blocks_removed == 4
    assert _report(a, "thinking").items == 4
    assert sum(isinstance(x, ThinkingCleared) for x in a.actions) == 4


def test_layer_2_strips_reasoning_tags_from_assistant_text_only(tmp_path: Path) -> None:
    # covers: PIP-1
    s = Session.new(tmp_path / "t.db")
    user = s.user("what do <think>tags</think> do?")
    first = s.step("<think>private plan</think>The answer is 4.", bash("cat a", "<think>x</think>"))
    second = s.step("reasoning before the reply</think>Visible.")
    a = s.assemble(128_000, cfg(**NO_HEAD))
    sent = _sent(a)
    assert sent[first[0].id].parts[0] == Text("The answer is 4.")
    assert sent[first[0].id].tool_calls == first[0].message.tool_calls
    assert sent[second[0].id].parts == (Text("Visible."),)
    assert sent[user.id] == user.message and sent[first[1].id] == first[1].message
    stripped = [x for x in a.actions if isinstance(x, TagsStripped)]
    assert [x.chars_removed for x in stripped] == [len("<think>private plan</think>"), 34]
    assert _report(a, "reasoning_tags").items == 2


def _chat(s: Session, turns: int) -> None:
    for n in range(turns):
        s.user(f"question {n}")
        s.step(f"answer {n}")


def test_layer_3_keeps_the_recent_user_turns_and_the_head(tmp_path: Path) -> None:
    # covers: PIP-1, PIP-4
    s = Session.new(tmp_path / "t.db")
    _chat(s, 12)
    a = s.assemble(128_000, cfg(history_turns=5))
    texts = [m.text for m in a.messages[1:]]
    assert texts[:4] == ["question 0", "answer 0", "question 1", "answer 1"]  # the head
    assert texts[4:] == [x for n in range(7, 12) for x in (f"question {n}", f"answer {n}")]
    (windowed,) = [x for x in a.actions if isinstance(x, Windowed)]
    assert windowed.entries == 10 and windowed.tokens > 0
    assert a.metrics.tokens_evicted >= windowed.tokens
    # Per-channel override.
    group = cfg(history_turns=5, history_turn_overrides={"group": 3}, channel="group")
    b = s.assemble(128_000, group)
    assert [m.text for m in b.messages[5:]] == [
        x for n in range(9, 12) for x in (f"question {n}", f"answer {n}")
    ]
    # The window slides when a new user turn arrives: announced, never silent.
    before = s.assemble(128_000, cfg(history_turns=5))
    s.user("question 12")
    after = s.assemble(128_000, cfg(history_turns=5))
    assert any(isinstance(x, Rebased) and x.reason == "window" for x in after.actions)
    assert common_messages(before.messages, after.messages) >= 5  # system + head survive


def test_layer_4_evicts_superseded_results_and_old_errors(tmp_path: Path) -> None:
    # covers: PIP-1, OBS-2, EVI-1
    s = Session.new(tmp_path / "t.db")
    s.user("fix a.py")
    old = s.step("read it", read("a.py", "v1 " * 400))[1]
    s.step("edit it", ("Edit", {"file_path": "a.py", "old": "v1", "new": "v2"}, "ok"))
    new = s.step("read again", read("a.py", "v2 " * 400))[1]
    failed = s.step("run", bash("python run.py", "Traceback: boom " * 40, True))[1]
    for n in range(16):
        s.step(f"look {n}", bash(f"python check.py {n}", f"fine {n}"))
    recent = s.step("run again", bash("python run.py --fast", "Traceback: again " * 40, True))[1]
    a = s.assemble(128_000, cfg(**NO_HEAD))
    sent = _sent(a)
    by_entry = {x.entry_id: x for x in a.actions if isinstance(x, Placeholdered)}
    assert by_entry[old.id].reason == "superseded by a later read of the same file"
    assert by_entry[failed.id].reason == "(an error) evicted after 15 turns"
    assert set(by_entry) == {old.id, failed.id}
    for entry in (old, failed):
        text = sent[entry.id].text
        result = entry.message.tool_result
        assert result is not None
        assert by_entry[entry.id].recovery in text and f"Call {result.call_id}" in text
        original = result.text
        assert read_back(s.ledger, s.scope, by_entry[entry.id].recovery) == original
    assert sent[failed.id].tool_result.is_error  # type: ignore[union-attr]
    assert sent[new.id] == new.message and sent[recent.id] == recent.message
    for e in s.entries:
        if e.role != "tool":
            assert sent[e.id] == e.message
    assert [(x.entry_id, x.supersedes) for x in a.actions if isinstance(x, Reread)] == [
        (new.id, old.id)
    ]
    assert _report(a, "evict").items == 2 and a.metrics.tokens_evicted > 0
    assert a.breakdown["reread_count"] == 1


def test_masking_switches_with_a_gap_so_it_cannot_flap() -> None:
    # covers: PIP-1
    chars = [60_000, 130_000, 100_000, 81_000, 79_000, 110_000, 125_000, 90_000]
    periods = masking_periods(list(enumerate(chars)), 120_000, 80_000)
    assert [periods[p] for p in range(len(chars))] == [None, 1, 1, 1, None, None, 6, 6]


def test_layer_5_masks_old_results_over_the_trigger_never_reads_or_recall(tmp_path: Path) -> None:
    # covers: PIP-1, OBS-1
    s = Session.new(tmp_path / "t.db")
    s.user("long task")
    kept = [s.step("read", read("notes.md", lines(1, 30)))[1]]
    kept.append(s.step("recall", ("session_search", {"query": "x"}, lines(2, 30)))[1])
    runs = [s.step(f"run {n}", bash(f"python job.py {n}", lines(n, 60)))[1] for n in range(40)]
    a = s.assemble(200_000, cfg(**NO_HEAD))
    assert a.breakdown["masking"] == "on" and int(a.breakdown["history_chars"]) > 120_000
    masked = {x.entry_id for x in a.actions if isinstance(x, Placeholdered) and x.layer == "mask"}
    # 42 tool uses: all but the last 25 are masked, except the file read and the recall.
    assert masked == {e.id for e in runs[:15]}
    sent = _sent(a)
    assert all(sent[e.id] == e.message for e in kept + runs[15:])
    assert all("masked: older than the last 25 tool uses" in sent[e.id].text for e in runs[:15])
    assert a.metrics.tokens_masked > 0 and _report(a, "mask").items == 15


def test_layer_6_micro_compacts_read_only_results_turn_over_turn(tmp_path: Path) -> None:
    # covers: PIP-2
    s = Session.new(tmp_path / "t.db")
    s.user("survey the repo")
    reads = []
    writes = []
    for n in range(30):
        reads.append(s.step(f"look {n}", bash(f"cat src/m{n}.py | head -50", lines(n, 12)))[1])
        if n % 10 == 0:
            writes.append(s.step("write", bash(f"python gen.py > out{n}", lines(n, 12)))[1])
    config = cfg(**NO_HEAD)
    before = s.assemble(128_000, config)
    cleared = [x for x in before.actions if isinstance(x, Placeholdered)]
    assert [x.entry_id for x in cleared] == [e.id for e in reads[:5]]
    assert all(x.layer == "micro_compact" for x in cleared)
    sent = _sent(before)
    assert all(sent[e.id] == e.message for e in writes + reads[5:])
    assert all(sent[e.id] == e.message for e in s.entries if e.role != "tool")
    # One more read-only use: exactly one new placeholder, announced as new, and nothing at or
    # below the previous cache fence changed.
    s.step("look again", bash("cat src/extra.py", lines(99, 12)))
    after = s.assemble(128_000, config)
    fresh = [x for x in after.actions if isinstance(x, Placeholdered) and x.new]
    assert [x.entry_id for x in fresh] == [reads[5].id]
    assert not any(isinstance(x, Rebased) for x in after.actions)
    fence = int(before.breakdown["cache_fence"])
    assert 1 < fence < len(before.messages)
    assert encoded(after.messages[:fence]) == encoded(before.messages[:fence])
    old = {x.entry_id: x for x in cleared}
    for x in after.actions:
        if isinstance(x, Placeholdered) and x.entry_id in old:
            assert not x.new and x.decided_at == old[x.entry_id].decided_at
    assert _report(after, "micro_compact").new == 1


@pytest.mark.parametrize(
    ("command", "reads"),
    [
        ("cat a.py", True),
        ("grep -rn foo src | head -20", True),
        ("cd repo && git log --oneline -5", True),
        ("sed -n '1,40p' x.py", True),
        ("find . -name '*.py'", True),
        ("sed -i s/a/b/ x.py", False),
        ("echo hi > x", False),
        ("find . -delete", False),
        ("python run.py", False),
        ("cat $(ls)", False),
        ("git commit -m x", False),
        ("cat 'unclosed", False),
    ],
)
def test_tier0_counts_only_reading_commands(command: str, reads: bool) -> None:
    # covers: PIP-2
    assert command_is_read_only(command) is reads


def test_layer_7_offloads_results_over_their_inline_cap(tmp_path: Path) -> None:
    # covers: PIP-3, EVI-1
    s = Session.new(tmp_path / "t.db")
    s.user("big outputs")
    big = s.step("run", bash("python dump.py", lines(1, 400)))[1]  # ~26k characters
    file_ok = s.step("read", read("a.py", lines(2, 180)))[1]  # ~12k: under the 15k file cap
    file_big = s.step("read", read("b.py", lines(3, 400)))[1]
    a = s.assemble(128_000, cfg(**NO_HEAD))
    sent = _sent(a)
    done = {x.entry_id: x for x in a.actions if isinstance(x, Offloaded)}
    assert set(done) == {big.id, file_big.id}
    assert sent[file_ok.id] == file_ok.message
    assert len(sent[big.id].text) < 8_000 + 400 < len(big.message.text)
    assert len(sent[file_big.id].text) < 15_000 + 400
    for entry in (big, file_big):
        text = sent[entry.id].text
        assert text[:100] == entry.message.text[:100] and text[-100:] == entry.message.text[-100:]
        assert read_back(s.ledger, s.scope, done[entry.id].recovery) == entry.message.text
        assert "EvidenceRead(entry=" in text and "offset=" in text
    assert _report(a, "offload").items == 2


def test_layer_10_cuts_the_oldest_steps_when_nothing_else_fits(tmp_path: Path) -> None:
    # covers: PIP-1, LIM-4
    s = Session.new(tmp_path / "t.db")
    s.user("go")
    for n in range(30):
        s.step(f"step {n}", bash(f"python job.py {n}", lines(n, 60)))
    newest = s.step("last", bash("python last.py", "done"))
    a = s.assemble(16_000, cfg(**NO_HEAD))  # no summary was made: the fit layer must act
    assert a.history_tokens <= 16_000
    (cut,) = [x for x in a.actions if isinstance(x, Cut)]
    assert cut.entries > 0 and cut.tokens_after < cut.tokens_before
    assert any(isinstance(x, Rebased) and x.reason == "cut" for x in a.actions)
    assert pairs_whole(a.messages)
    sent = _sent(a)
    assert all(e.id in sent for e in newest) and s.entries[0].id in sent  # newest step, request
    assert int(a.breakdown["cache_fence"]) <= 2


def test_layer_10_raises_a_coded_error_when_the_fixed_part_cannot_fit(tmp_path: Path) -> None:
    # covers: LIM-5
    s = Session.new(tmp_path / "t.db")
    s.ledger.append(s.scope, [Message(Role.SYSTEM, (Text(lines(0, 2_000)),))])
    s.user("hi")
    s.step("hello")
    with pytest.raises(BudgetError) as info:
        s.assemble(16_000, cfg())
    assert isinstance(info.value, ProtectedTailOverflow)
    assert info.value.code == "CONTEXT_PRESSURE_LOOP"


def test_the_layers_run_in_the_spec_order(tmp_path: Path) -> None:
    # covers: PIP-1, OBS-1
    assert layer_names() == (
        "thinking",
        "reasoning_tags",
        "history_window",
        "evict",
        "mask",
        "micro_compact",
        "offload",
        "summary",
        "restore",
        "fit",
    )
    s = Session.new(tmp_path / "t.db")
    s.user("order")
    first = s.step("read", read("a.py", "v1 " * 200))[1]
    for n in range(26):
        s.step(f"look {n}", read(f"m{n}.py", lines(n, 8)))
    s.step("again", read("a.py", "v2 " * 200))
    a = s.assemble(128_000, cfg(**NO_HEAD))
    reports = [x for x in a.actions if isinstance(x, LayerReport)]
    assert [r.order for r in reports] == list(range(1, 11))
    assert [r.layer for r in reports] == list(layer_names())
    # Each layer starts from what the one before left.
    assert all(b.tokens_before == a_.tokens_after for a_, b in pairwise(reports))
    # The first read is both superseded (layer 4) and beyond the Tier-0 window (layer 6); it
    # aged out of the window first, so the placeholder it got then is the one it keeps.
    (x,) = [p for p in a.actions if isinstance(p, Placeholdered) and p.entry_id == first.id]
    assert x.layer == "micro_compact"
    assert a.metrics.layer_count == sum(r.acted for r in reports)
    assert set(a.metrics.as_dict()) >= {"layerCount", "tokensMasked", "thinkingBlocksRemoved"}
