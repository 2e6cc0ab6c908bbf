"""Regressions named after public reports of context engines that failed in these ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _context_sessions import COUNTER, SYSTEM, blob, budget, config, new_ledger
from comal.context import (
    Assembly,
    Bounded,
    Checkpointed,
    EngineConfig,
    EngineState,
    Limits,
    ProtectedTailOverflow,
    Referenced,
    View,
    assemble,
    store_checkpoint,
)
from comal.errors import ContextPressureLoop
from comal.evidence import parse_evidence_call, read_evidence
from comal.ledger import Scope, SQLiteLedger, open_ledger
from comal.messages import Message, ToolCall, group_messages, open_calls, orphan_results
from comal.tokens import Budget, count_message


def _turn(
    ledger: SQLiteLedger,
    scope: Scope,
    bud: Budget,
    cfg: EngineConfig,
    state: EngineState | None = None,
    *,
    store: bool = True,
) -> tuple[View, Assembly]:
    view = View.from_ledger(ledger, scope, system=(SYSTEM,))
    result = assemble(view, bud, cfg, state=state)
    if store and result.checkpoint_to_store is not None:
        store_checkpoint(ledger, scope, result.checkpoint_to_store)
    return view, result


def _tool_step(
    ledger: SQLiteLedger, scope: Scope, n: int, tool: str, text: str, **kw: bool
) -> None:
    call = ToolCall(f"c{n}", tool, json.dumps({"pattern": str(n)}))
    ledger.append(scope, [Message.assistant("", call), Message.tool(call.id, text, **kw)])


def _sized(tokens: int, seed: int) -> str:
    """Text whose tool message costs about ``tokens`` with the test counter."""
    size = int(tokens * 2.8)
    for _ in range(6):
        text = blob(seed, size)
        have = count_message(COUNTER, Message.tool("c", text))
        if abs(have - tokens) <= tokens // 100:
            break
        size = int(size * tokens / max(have, 1))
    return text


def test_protected_tail_larger_than_target_is_bounded_then_stopped_lossless_claw_639(
    tmp_path: Path,
) -> None:
    # covers: LIM-4, LIM-5, LIM-2
    ledger, scope = new_ledger(tmp_path / "639.db")
    # Sized against a 60 % target: five protected results of 40 % of it overflow the threshold.
    # With both yields off, the protected results may only be bounded: never referenced, never
    # checkpointed.
    bud = budget(16_000)
    cfg = config(
        target_ratio=0.6, yield_protected_to_checkpoint=False, yield_protected_to_references=False
    )
    limits = Limits.of(bud, cfg)
    bounded_turns: list[int] = []
    state: EngineState | None = None
    # Each of the five protected results is 40 % of the target: together twice the target.
    with pytest.raises(ContextPressureLoop) as info:
        for n in range(12):
            _tool_step(ledger, scope, n, "Read", _sized(limits.target * 2 // 5, n))
            view, result = _turn(ledger, scope, bud, cfg, state)
            state = result.next_state
            assert result.history_tokens <= limits.capacity
            if "bounded-tail" not in str(result.breakdown["stage"]):
                continue
            bounded_turns.append(n)
            assert result.history_tokens <= limits.target
            _check_bounded(ledger, scope, view, result)
    # A bounded assembly while it lasts, then a coded stop: the cycle never runs on.
    assert 1 <= len(bounded_turns) < cfg.pressure_loop_n
    assert bounded_turns == list(range(bounded_turns[0], bounded_turns[0] + len(bounded_turns)))
    assert "lower keep_recent_results" in str(info.value)


def test_protected_tail_larger_than_target_yields_to_a_checkpoint_lossless_claw_639(
    tmp_path: Path,
) -> None:
    # covers: LIM-3, LIM-4, LIM-5
    ledger, scope = new_ledger(tmp_path / "639y.db")
    # The checkpoint's yield (on by default) alone: references may not take protected results.
    bud = budget(16_000)
    cfg = config(target_ratio=0.6, yield_protected_to_references=False)
    limits = Limits.of(bud, cfg)
    state: EngineState | None = None
    covered_protected = 0
    for n in range(12):
        _tool_step(ledger, scope, n, "Read", _sized(limits.target * 2 // 5, n))
        view, result = _turn(ledger, scope, bud, cfg, state)
        state = result.next_state
        # Every turn fits and no run stops: the older protected results go to a checkpoint.
        assert result.history_tokens <= limits.threshold
        newest = [e for e in view.entries if e.message.tool_result is not None][-5:]
        for a in result.actions:
            if isinstance(a, Checkpointed):
                for e in newest:
                    if a.first_seq <= e.seq <= a.last_seq:
                        covered_protected += 1
                        out = e.message.tool_result
                        assert out is not None and e.output_digest is not None
                        page = read_evidence(
                            ledger, scope, e.id, expected_digest=e.output_digest, limit=8000
                        )
                        assert out.text.startswith(page.text)
    assert covered_protected > 0
    assert ledger.latest_checkpoint(scope) is not None


def test_protected_results_over_the_threshold_are_referenced_not_checkpointed_every_turn(
    tmp_path: Path,
) -> None:
    # covers: LIM-2, LIM-3, LIM-4
    # Issue 19 item 16: at a small window each new output pushed the five protected results
    # over the threshold and a new checkpoint was derived on 7 calls of 8, rewriting the cached
    # prefix from its start every turn. Now the older protected results are referenced, oldest
    # first and sticky: only the end of the prefix changes, and the newest step stays whole.
    ledger, scope = new_ledger(tmp_path / "refs.db")
    bud, cfg = budget(16_000), config(target_ratio=0.6)
    limits = Limits.of(bud, cfg)
    state: EngineState | None = None
    referenced_before: set[int] = set()
    checkpoints = 0
    for n in range(12):
        _tool_step(ledger, scope, n, "Read", _sized(limits.target * 2 // 5, n))
        view, result = _turn(ledger, scope, bud, cfg, state)
        state = result.next_state
        assert result.history_tokens <= limits.threshold
        assert open_calls(result.messages) == [] and orphan_results(result.messages) == []
        checkpoints += result.checkpoint_to_store is not None
        if result.checkpoint_to_store is not None:
            referenced_before = set()
            continue
        refs = {a.entry_id: a.ref for a in result.actions if isinstance(a, Referenced)}
        sent = dict(zip(result.entry_ids, result.messages, strict=True))
        newest = view.entries[-1]
        assert sent[newest.id] == newest.message  # the newest step is sent whole
        assert referenced_before <= set(refs)  # sticky: referenced until a checkpoint
        by_id = {e.id: e for e in view.entries}
        for eid, ref in refs.items():
            assert eid not in {e.id for e in view.entries[-2:]}  # never the newest step's
            assert ref.digest == by_id[eid].output_digest  # names the exact stored bytes
            page = read_evidence(ledger, scope, eid, expected_digest=ref.digest, limit=8000)
            assert by_id[eid].message.tool_result.text.startswith(page.text)  # type: ignore[union-attr]
        referenced_before = set(refs)
    assert checkpoints <= 1  # was one a turn once the five protected results filled the target


def _check_bounded(ledger: SQLiteLedger, scope: Scope, view: View, result: Assembly) -> None:
    """The K newest results are all sent bounded, each naming the call that reads the rest."""
    bounded = {a.entry_id for a in result.actions if isinstance(a, Bounded)}
    newest = [e for e in view.entries if e.message.tool_result is not None][-5:]
    assert bounded >= {e.id for e in newest}
    for message, entry_id in zip(result.messages, result.entry_ids, strict=True):
        if entry_id in bounded:
            call = parse_evidence_call(message.text.split("exactly with ", 1)[1].split(" …]")[0])
            page = read_evidence(ledger, scope, call.entry, offset=call.offset)
            assert page.digest == call.expected_digest


def test_protected_tail_that_cannot_fit_raises_a_coded_error_lossless_claw_639(
    tmp_path: Path,
) -> None:
    # covers: LIM-5
    ledger, scope = new_ledger(tmp_path / "639b.db")
    calls = [ToolCall(f"p{i}", "Grep", json.dumps({"pattern": blob(i, 200)})) for i in range(60)]
    ledger.append(scope, [Message.assistant("", *calls)])
    ledger.append(
        scope, [Message.tool(c.id, blob(i, 400)) for i, c in enumerate(calls)], join_step=0
    )
    view = View.from_ledger(ledger, scope, system=(SYSTEM,))
    with pytest.raises(ProtectedTailOverflow) as info:
        assemble(view, budget(4_000), config())
    assert info.value.code == "CONTEXT_PRESSURE_LOOP"
    assert "keep_recent_results" in str(info.value) and "larger window" in str(info.value)


@pytest.mark.parametrize("fixed", [9_000, 11_000, 13_000])
def test_target_never_collapses_toward_zero_lossless_claw_1085(fixed: int) -> None:
    # covers: LIM-3, TOK-4
    bud = Budget.for_window(16_000, system_tokens=fixed, tools_tokens=0)
    cfg = config()
    limits = Limits.of(bud, cfg)
    naive = int(cfg.target_ratio * bud.input_limit) - bud.fixed
    assert naive < limits.target and limits.target >= int(0.25 * bud.history_capacity) > 0
    assert limits.target < limits.threshold <= limits.capacity


def test_huge_instructions_still_leave_a_working_history_lossless_claw_1085(
    tmp_path: Path,
) -> None:
    # covers: LIM-3, TOK-4
    bud = Budget.for_window(16_000, system_tokens=9_000, tools_tokens=0)
    cfg = config()
    limits = Limits.of(bud, cfg)
    ledger, scope = new_ledger(tmp_path / "1085.db")
    for n in range(25):
        _tool_step(ledger, scope, n, "Bash", blob(n, 600), is_error=True)
        view, result = _turn(ledger, scope, bud, cfg)
        assert result.history_tokens <= limits.capacity
        # The newest step is always in the context: the cut never empties the history.
        assert result.entry_ids[-1] == view.entries[-1].id


def test_never_converging_compaction_stops_with_pressure_loop_268(tmp_path: Path) -> None:
    # covers: LIM-5
    ledger, scope = new_ledger(tmp_path / "268.db")
    bud = budget(16_000)
    # With the yields off neither a reference nor a checkpoint may take protected outputs, so
    # nothing converges.
    cfg = config(
        keep_recent_results=10,
        never_reference_tools=frozenset({"Grep"}),
        yield_protected_to_checkpoint=False,
        yield_protected_to_references=False,
    )
    limits = Limits.of(bud, cfg)
    # Ten protected outputs sit just under the threshold; each new one pushes it over, and a
    # derivation can only take out the one step that left the protected window (~9 %).
    size = (limits.threshold - 400) // 10
    streaks: list[int] = []
    with pytest.raises(ContextPressureLoop) as info:
        state: EngineState | None = None
        for n in range(60):
            _tool_step(ledger, scope, n, "Grep", _sized(size, n))
            _, result = _turn(ledger, scope, bud, cfg, state)
            state = result.next_state
            if result.checkpoint_to_store is not None:
                streaks.append(state.low_saving_streak)
    assert streaks[-2:] == [1, 2] and len(streaks) < 20
    message = str(info.value)
    assert message.startswith("CONTEXT_PRESSURE_LOOP: 3 derivations in a row")
    assert "nothing is lost" in message and "larger window" in message
    # A resumed process (no state in memory) reads the streak from the stored checkpoint.
    with pytest.raises(ContextPressureLoop):
        _turn(ledger, scope, bud, cfg, None)


def test_a_good_derivation_resets_the_streak(tmp_path: Path) -> None:
    # covers: LIM-5
    ledger, scope = new_ledger(tmp_path / "reset.db")
    bud, cfg = budget(16_000), config()
    state = EngineState(low_saving_streak=2)
    for n in range(40):
        _tool_step(ledger, scope, n, "Bash", blob(n, 2_000), is_error=True)
        _, result = _turn(ledger, scope, bud, cfg, state)
        state = result.next_state
        if result.checkpoint_to_store is not None:
            break
    assert result.checkpoint_to_store is not None
    assert state.low_saving_streak == 0
    assert result.checkpoint_to_store.meta["low_saving_streak"] == 0


@settings(max_examples=15, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 4_000), min_size=8, max_size=30),
    fanout=st.integers(1, 4),
    window=st.sampled_from([4_000, 16_000]),
)
def test_compaction_never_splits_a_tool_pair_claude_code_2796_openai_agents_2317(
    sizes: list[int], fanout: int, window: int
) -> None:
    # covers: LIM-4
    ledger = open_ledger(":memory:", counter=COUNTER)
    scope = ledger.create_session("t", "a")
    bud, cfg = budget(window), config()
    for n in range(0, len(sizes), fanout):
        chunk = sizes[n : n + fanout]
        calls = [ToolCall(f"c{n}_{i}", "Bash", "{}") for i in range(len(chunk))]
        step = ledger.append(scope, [Message.assistant("parallel", *calls)])[0].step
        # Results arrive one by one, joining their step, as a live agent records them.
        for i, (call, size) in enumerate(zip(calls, chunk, strict=True)):
            ledger.append(scope, [Message.tool(call.id, blob(n + i, size))], join_step=step)
        try:
            view, result = _turn(ledger, scope, bud, cfg)
        except ContextPressureLoop:
            break  # a coded stop is allowed; a split pair never is
        messages = result.messages
        assert open_calls(messages) == [] and orphan_results(messages) == []
        proposal = result.checkpoint_to_store
        if proposal is not None:
            after = [e for e in view.entries if e.seq > proposal.last_seq]
            assert not after or after[0].step == after[0].seq
            groups = group_messages([e.message for e in view.entries])
            ends = {view.entries[g.start + len(g.messages) - 1].seq for g in groups}
            assert proposal.last_seq in ends
    ledger.close()


def test_compaction_fires_whenever_history_is_over_the_threshold_codex_16033(
    tmp_path: Path,
) -> None:
    # covers: LIM-2, LIM-3, TOK-4
    ledger, scope = new_ledger(tmp_path / "16033.db")
    bud, cfg = budget(16_000), config()
    limits = Limits.of(bud, cfg)
    derived = 0
    for n in range(60):
        # Errors are never referenced: only a checkpoint can make room.
        _tool_step(ledger, scope, n, "Bash", blob(n, 2_000), is_error=True)
        _, result = _turn(ledger, scope, bud, cfg)
        assert result.history_tokens <= limits.threshold
        derived += result.checkpoint_to_store is not None
    assert derived >= 3


def test_compaction_trusts_stored_counts_codex_16033(tmp_path: Path) -> None:
    # covers: LIM-2, TOK-2
    class Pessimist:
        name = "pessimist"

        def count(self, text: str) -> int:
            return 8 * COUNTER.count(text)

    ledger = open_ledger(tmp_path / "counts.db", counter=Pessimist())
    scope = ledger.create_session("t", "a")
    for n in range(12):
        _tool_step(ledger, scope, n, "Read", blob(n, 1_500))
    view = View.from_ledger(ledger, scope, system=(SYSTEM,))
    assert sum(e.tokens for e in view.entries) > budget(16_000).history_capacity
    result = assemble(view, budget(16_000), config())
    # The engine never re-tokenizes stored entries: their stored counts trigger the cut.
    assert result.breakdown["stage"] != "verbatim"
    assert result.history_tokens <= Limits.of(budget(16_000), config()).threshold
    ledger.close()
