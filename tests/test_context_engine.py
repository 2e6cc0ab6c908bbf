"""The default engine, turn by turn: verbatim, references, bounds, checkpoints, media, metrics."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from pydantic import ValidationError

import comal.context as context
from _context_sessions import COUNTER, SYSTEM, blob, budget, config, new_ledger, read_all
from comal.context import (
    Bounded,
    Checkpointed,
    EngineConfig,
    Limits,
    MediaReferenced,
    Referenced,
    View,
    assemble,
    store_checkpoint,
)
from comal.errors import ContextOverhead
from comal.evidence import parse_evidence_call, read_evidence
from comal.ledger import Scope, SQLiteLedger
from comal.messages import Checkpoint, Media, Message, Role, Text, ToolCall, orphan_results
from comal.tokens import REPLY_PRIMING, Budget

OBS_NAMES = [
    "tokensLoaded",
    "tokensEvicted",
    "tokensMasked",
    "tokensCompacted",
    "thinkingBlocksRemoved",
    "budgetUtilization",
    "sessionDepth",
    "sessionToolResults",
    "layerCount",
    "durationMs",
]


@pytest.fixture
def session(tmp_path: Path) -> Iterator[tuple[SQLiteLedger, Scope]]:
    ledger, scope = new_ledger(tmp_path / "engine.db")
    yield ledger, scope
    ledger.close()


def _step(
    ledger: SQLiteLedger,
    scope: Scope,
    n: int,
    tool: str,
    output: str | tuple[Text | Media, ...],
    *,
    error: bool = False,
    args: Mapping[str, object] | None = None,
) -> None:
    call = ToolCall(f"c{n}", tool, json.dumps(args or {"file_path": f"f{n}.py"}))
    ledger.append(
        scope, [Message.assistant(f"step {n}", call), Message.tool(call.id, output, is_error=error)]
    )


def _view(ledger: SQLiteLedger, scope: Scope) -> View:
    return View.from_ledger(ledger, scope, system=(SYSTEM,))


def test_verbatim_while_it_fits(session: tuple[SQLiteLedger, Scope]) -> None:
    # covers: LIM-1, OBS-1
    ledger, scope = session
    ledger.append(scope, [Message.user("fix it 😀")])
    for n in range(3):
        _step(ledger, scope, n, "Read", blob(n, 500))
    view = _view(ledger, scope)
    result = assemble(view, budget(16_000), config())
    assert result.messages == (SYSTEM, *(e.message for e in view.entries))
    assert result.actions == () and result.checkpoint_to_store is None
    assert result.history_tokens == sum(e.tokens for e in view.entries) + REPLY_PRIMING
    assert result.breakdown["stage"] == "verbatim"
    metrics = result.metrics.as_dict()
    assert list(metrics) == OBS_NAMES
    assert metrics["sessionDepth"] == 7 and metrics["sessionToolResults"] == 3
    assert metrics["layerCount"] == 0 and metrics["tokensMasked"] == 0
    assert "durationMs" not in result.metrics.as_dict(timing=False)


def test_duration_is_kept_out_of_equality(session: tuple[SQLiteLedger, Scope]) -> None:
    # covers: OBS-1
    ledger, scope = session
    _step(ledger, scope, 0, "Read", "x")
    first = assemble(_view(ledger, scope), budget(16_000), config())
    second = assemble(_view(ledger, scope), budget(16_000), config())
    slower = dataclasses.replace(
        second, metrics=dataclasses.replace(second.metrics, duration_ms=1e9)
    )
    assert first == slower and first.fingerprint() == slower.fingerprint()


def test_overhead_is_refused_before_anything() -> None:
    # covers: TOK-5
    bad = Budget.for_window(4_000, system_tokens=3_000, tools_tokens=1_000)
    with pytest.raises(ContextOverhead, match="CONTEXT_OVERHEAD"):
        assemble(View(()), bad, config())


def test_config_ranges_and_schema() -> None:
    # covers: CFG-1
    with pytest.raises(ValidationError):
        EngineConfig(target_ratio=0.95)
    with pytest.raises(ValidationError):
        EngineConfig(keep_recent_results=0)
    with pytest.raises(ValidationError):
        EngineConfig.model_validate({"unknown": 1})
    schema = EngineConfig.model_json_schema()
    assert "counter" not in schema["properties"]
    assert schema["properties"]["threshold_ratio"]["default"] == 0.9
    with pytest.raises(ValidationError):
        config().threshold_ratio = 0.5  # frozen


def test_oldest_large_results_become_exact_references(
    session: tuple[SQLiteLedger, Scope],
) -> None:
    # covers: LIM-2, LED-6, EVI-1
    ledger, scope = session
    ledger.append(scope, [Message.user("investigate")])
    _step(ledger, scope, 0, "Bash", blob(100, 3_000) + "\nboom", error=True)
    _step(ledger, scope, 1, "EvidenceRead", blob(101, 3_000))
    _step(ledger, scope, 2, "Read", "tiny")
    for n in range(3, 16):
        _step(ledger, scope, n, "Read", blob(n, 3_000))
    view, cfg = _view(ledger, scope), config()
    result = assemble(view, budget(16_000), cfg)
    refs = [a for a in result.actions if isinstance(a, Referenced)]
    assert refs and result.checkpoint_to_store is None
    assert result.history_tokens <= result.breakdown["history_threshold"]  # type: ignore[operator]
    results = [e for e in view.entries if e.message.tool_result is not None]
    eligible = [e for e in results[3:-5]]
    # Oldest first: the referenced ones are a prefix of the eligible ones.
    assert [r.entry_id for r in refs] == [e.id for e in eligible[: len(refs)]]
    sent = dict(zip(result.entry_ids, result.messages, strict=True))
    for e in results[:3] + results[-5:]:  # error, never-reference tool, tiny, K newest
        assert sent[e.id] == e.message
    ref = refs[0]
    text = sent[ref.entry_id].text
    stored = next(e for e in results if e.id == ref.entry_id)
    assert stored.output_digest == ref.ref.digest and f"sha256 {ref.ref.digest}" in text
    assert ref.ref.preview and ref.ref.preview in text
    call = re.search(r"EvidenceRead\([^)]*\)", text)
    assert call is not None
    args = parse_evidence_call(call.group())
    assert read_all(ledger, scope, args.entry, args.field, ref.ref.digest) == stored.message.text
    assert ref.tokens_after < ref.tokens_before
    assert result.metrics.tokens_masked == sum(r.tokens_before - r.tokens_after for r in refs)


def test_references_are_sticky_and_the_prefix_stays_identical(
    session: tuple[SQLiteLedger, Scope],
) -> None:
    # covers: LIM-2, CCH-1
    ledger, scope = session
    for n in range(16):
        _step(ledger, scope, n, "Read", blob(n, 3_000))
    bud, cfg = budget(16_000), config()
    first = assemble(_view(ledger, scope), bud, cfg)
    assert any(isinstance(a, Referenced) for a in first.actions)
    _step(ledger, scope, 99, "Read", "small")
    second = assemble(_view(ledger, scope), bud, cfg)
    assert second.messages[: len(first.messages)] == first.messages
    # A resumed process, with no memory of the first turn, decides the same.
    again = assemble(_view(ledger, scope), bud, cfg, state=None)
    assert again == second


def test_a_message_too_large_for_the_window_is_bounded_honestly(
    session: tuple[SQLiteLedger, Scope],
) -> None:
    # covers: LIM-4, EVI-1, EVI-2
    ledger, scope = session
    huge = blob(7, 60_000)
    ledger.append(scope, [Message.user("read the log")])
    _step(ledger, scope, 0, "Bash", huge)
    view = _view(ledger, scope)
    result = assemble(view, budget(16_000), config())
    bounded = [a for a in result.actions if isinstance(a, Bounded)]
    assert [b.fields for b in bounded] == [("content",)]
    assert result.history_tokens <= budget(16_000).history_capacity
    text = result.messages[-1].text
    marker = re.search(r"left out between offsets (\d+) and (\d+)", text)
    call = re.search(r"EvidenceRead\([^)]*\)", text)
    assert marker is not None and call is not None
    a, b = int(marker[1]), int(marker[2])
    args = parse_evidence_call(call.group())
    assert args.offset == a
    middle = ""
    offset = a
    while offset < b:
        page = read_evidence(ledger, scope, args.entry, offset=offset, limit=min(8_000, b - offset))
        middle += page.text
        offset = page.end
    head, tail = text.split("\n[… bounded by comal")[0], text.rsplit("…]\n", 1)[1]
    assert head + middle + tail == huge
    assert orphan_results(result.messages) == []


def _checkpoint_session(ledger: SQLiteLedger, scope: Scope) -> str:
    long_request = "Please refactor:\n" + blob(5, 3_000)
    ledger.append(scope, [Message.user("Fix the failing test in src/app.py 😀")])
    todos = {"todos": [{"content": "reproduce", "status": "completed"}, {"content": "fix"}]}
    _step(ledger, scope, 0, "TodoWrite", "ok", args=todos)
    _step(ledger, scope, 1, "Read", "def app(): pass\n", args={"file_path": "src/app.py"})
    _step(ledger, scope, 2, "Write", "written", args={"file_path": "src/new.py", "content": "x=1"})
    _step(ledger, scope, 3, "Edit", "edited", args={"file_path": "src/app.py"})
    _step(ledger, scope, 4, "Bash", "FAILED\nExit code: 2", args={"command": "pytest -q"})
    ledger.append(scope, [Message.user(long_request)])
    for n in range(5, 30):
        _step(ledger, scope, n, "Grep", blob(n, 2_500), error=True)
    return long_request


def test_checkpoint_carries_requests_plan_files_commands_and_errors(
    session: tuple[SQLiteLedger, Scope],
) -> None:
    # covers: LIM-3, LIM-4, EVI-1
    ledger, scope = session
    long_request = _checkpoint_session(ledger, scope)
    view = _view(ledger, scope)
    # A cut to 60 % leaves this session's protected tail under the target.
    result = assemble(view, budget(16_000), config(target_ratio=0.6))
    proposal = result.checkpoint_to_store
    assert proposal is not None
    done = [a for a in result.actions if isinstance(a, Checkpointed)]
    assert done == [
        Checkpointed(
            proposal.first_seq,
            proposal.last_seq,
            done[0].entries,
            done[0].tokens_before,
            done[0].tokens_after,
        )
    ]
    assert result.history_tokens <= result.breakdown["history_target"]  # type: ignore[operator]
    text = proposal.message.text
    assert "Fix the failing test in src/app.py 😀" in text
    assert "[completed] reproduce" in text and "[item] fix" in text
    assert re.search(r"src/app\.py: edited by Edit", text)
    assert re.search(r"src/new\.py: written by Write at seq \d+, content sha256 [0-9a-f]{16}", text)
    assert "`pytest -q` → exit 2" in text and "Last errors" in text
    # The long request is referenced exactly, through its text field.
    call = re.search(r'EvidenceRead\(entry=\d+, field="text"[^)]*\)', text)
    assert call is not None
    args = parse_evidence_call(call.group())
    assert args.expected_digest is not None
    assert read_all(ledger, scope, args.entry, "text", args.expected_digest) == long_request
    # Whole steps only: the first entry after the range starts a step.
    after = [e for e in view.entries if e.seq > proposal.last_seq]
    assert after[0].step == after[0].seq
    assert result.messages[1] == proposal.message
    assert result.entry_ids[2] == after[0].id
    assert result.metrics.tokens_evicted > 0 and result.metrics.tokens_compacted == proposal.tokens


def test_the_stored_checkpoint_reproduces_the_assembly(
    session: tuple[SQLiteLedger, Scope],
) -> None:
    # covers: LIM-3, CCH-1
    ledger, scope = session
    _checkpoint_session(ledger, scope)
    bud, cfg = budget(16_000), config()
    proposed = assemble(_view(ledger, scope), bud, cfg)
    assert proposed.checkpoint_to_store is not None
    record = store_checkpoint(ledger, scope, proposed.checkpoint_to_store)
    assert record.message == proposed.checkpoint_to_store.message
    following = assemble(_view(ledger, scope), bud, cfg)
    assert following.messages == proposed.messages and following.actions == tuple(
        a for a in proposed.actions if not isinstance(a, Checkpointed)
    )


def test_a_later_checkpoint_folds_only_new_steps(session: tuple[SQLiteLedger, Scope]) -> None:
    # covers: LIM-3
    ledger, scope = session
    _checkpoint_session(ledger, scope)
    bud, cfg = budget(16_000), config()
    first = assemble(_view(ledger, scope), bud, cfg).checkpoint_to_store
    assert first is not None
    store_checkpoint(ledger, scope, first)
    for n in range(40, 70):
        _step(ledger, scope, n, "Bash", blob(n, 2_500), error=True)
    view = _view(ledger, scope)
    assert all(e.seq > first.last_seq for e in view.entries)
    second = assemble(view, bud, cfg).checkpoint_to_store
    assert second is not None
    assert second.first_seq == first.first_seq and second.last_seq > first.last_seq
    assert second.meta["state"]["generation"] == 2
    # What only the first checkpoint saw is still there, though those entries are not in view.
    assert "Fix the failing test in src/app.py 😀" in second.message.text
    assert "src/new.py" in second.message.text


def test_a_foreign_checkpoint_is_kept_as_prior_text_and_never_splits_a_step(
    session: tuple[SQLiteLedger, Scope],
) -> None:
    # covers: LIM-3, LIM-4
    ledger, scope = session
    ledger.append(scope, [Message.system("stored instructions")])
    calls = [ToolCall(f"p{i}", "Read", "{}") for i in range(3)]
    ledger.append(scope, [Message.assistant("", *calls)] + [Message.tool(c.id, "r") for c in calls])
    foreign = Message(Role.USER, (Checkpoint("an older summary by someone else", 1, 2),))
    ledger.add_checkpoint(scope, foreign, first_seq=1, last_seq=2)  # ends inside the step
    view = _view(ledger, scope)
    assert [e.seq for e in view.pinned] == [0]
    assert view.entries[0].seq == 1  # the whole step, not an orphan result
    result = assemble(view, budget(16_000), config())
    assert orphan_results(result.messages) == []
    assert result.messages[1].text == "stored instructions" and result.messages[2] == foreign
    for n in range(40):
        _step(ledger, scope, n, "Bash", blob(n, 2_500), error=True)
    proposal = assemble(_view(ledger, scope), budget(16_000), config()).checkpoint_to_store
    assert proposal is not None and proposal.first_seq == 1
    assert "an older summary by someone else" in proposal.message.text


def test_images_beyond_their_reserve_are_referenced_honestly(
    session: tuple[SQLiteLedger, Scope],
) -> None:
    # covers: LIM-6
    ledger, scope = session
    png = Media("image/png", data="iVBORw0KGgo=", size=8)
    for n in range(4):
        _step(ledger, scope, n, "Screenshot", (Text(f"shot {n}"), png))
    view = _view(ledger, scope)
    bud = budget(16_000)
    result = assemble(view, bud, config())
    limits = Limits.of(bud, config())
    masked = [a for a in result.actions if isinstance(a, MediaReferenced)]
    assert [m.seq for m in masked] == [1, 3]  # the two oldest; two images fit the reserve
    sent = dict(zip(result.entry_ids, result.messages, strict=True))
    for m in masked:
        assert "pixels are not in this context" in sent[m.entry_id].text
        assert "shot" in sent[m.entry_id].text  # the text part is untouched
    images = sum(
        isinstance(p, Media)
        for m in result.messages
        if (r := m.tool_result) is not None and not isinstance(r.content, str)
        for p in r.content
    )
    assert images * 1_600 <= limits.media_reserve
    assert result.messages[-1] == view.entries[-1].message  # the newest image is sent


def test_exports() -> None:
    assert len(set(context.__all__)) == len(context.__all__)
    for name in context.__all__:
        assert hasattr(context, name)
    assert COUNTER.name == "estimate:v1"
