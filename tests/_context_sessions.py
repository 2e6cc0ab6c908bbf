"""Generated agent sessions for the context-engine tests, and the checks every assembly passes.

Sessions are drawn as small integers (sizes, seeds, flags) and expanded into text here, so
hypothesis stays fast while outputs still reach tens of kilobytes, with astral-plane emoji,
CRLF line ends, errors and images. :func:`run` appends the steps one at a time like a live agent,
assembles after each, stores every proposed checkpoint, and returns what it saw.
"""

from __future__ import annotations

import base64
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from comal.context import (
    Assembly,
    Bounded,
    Checkpointed,
    EngineConfig,
    EngineState,
    MediaReferenced,
    Referenced,
    View,
    assemble,
    store_checkpoint,
)
from comal.errors import BudgetError
from comal.evidence import EvidencePage, parse_evidence_call, read_evidence
from comal.ledger import Scope, SQLiteLedger, open_ledger
from comal.messages import (
    Checkpoint,
    EvidenceRef,
    Media,
    Message,
    Summary,
    Text,
    ToolCall,
    open_calls,
    orphan_results,
    sha256_hex,
)
from comal.messages.wire import render_engine_part
from comal.tokens import REPLY_PRIMING, Budget, EstimatingCounter, count_message

COUNTER = EstimatingCounter()
SYSTEM = Message.system("You are a careful coding agent. Use the tools; read evidence exactly.")
TOOLS = ("Read", "Bash", "Write", "Edit", "TodoWrite", "EvidenceRead", "Grep")
_WORDS = ("alpha", "beta", "gamma", "δέλτα", "😀", "🧪x", "ok", "FAIL", '{"k": 1}', "    ")
_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(48))).decode()


def blob(seed: int, size: int) -> str:
    """About ``size`` characters of mixed text with emoji and CRLF, a pure function of seed."""
    rnd = random.Random(seed)
    out: list[str] = []
    n = 0
    while n < size:
        word = rnd.choice(_WORDS)
        sep = rnd.choice((" ", " ", "\r\n", "\n"))
        out.append(word + sep)
        n += len(word) + 1
    return "".join(out)[:size]


@dataclass(frozen=True)
class CallSpec:
    tool: str
    size: int
    seed: int
    error: bool
    image: bool


@dataclass(frozen=True)
class StepSpec:
    user: int  # 0: no user message before the step, else its length
    text: int
    calls: tuple[CallSpec, ...]


def step_specs(window: int) -> st.SearchStrategy[StepSpec]:
    # Text here runs ~2.8 characters a token: a third of the outputs are small, a third up to
    # half the window in characters (a sixth in tokens), a third large enough to break the
    # single-message bound at every window.
    call = st.builds(
        CallSpec,
        tool=st.sampled_from(TOOLS),
        size=st.one_of(
            st.integers(0, 300),
            st.integers(0, window // 2),
            st.integers(window // 2, 3 * window // 2),
        ),
        seed=st.integers(0, 10_000),
        error=st.integers(0, 9).map(lambda n: n == 0),
        image=st.integers(0, 9).map(lambda n: n == 0),
    )
    return st.builds(
        StepSpec,
        user=st.integers(0, 5).flatmap(lambda n: st.integers(10, 3_000) if n == 0 else st.just(0)),
        text=st.integers(0, 300),
        calls=st.lists(call, min_size=0, max_size=3).map(tuple),
    )


def sessions(
    window: int, min_steps: int = 6, max_steps: int = 22
) -> st.SearchStrategy[list[StepSpec]]:
    """Sessions whose outputs add up to a few windows, so every stage is exercised."""
    return st.lists(step_specs(window), min_size=min_steps, max_size=max_steps)


def arguments(spec: CallSpec, i: int) -> str:
    path = f"src/mod_{spec.seed % 5}.py"
    if spec.tool == "Bash":
        return json.dumps({"command": f"pytest -k case{i} 😀"})
    if spec.tool == "Write":
        return json.dumps({"file_path": path, "content": blob(spec.seed + 1, 200)})
    if spec.tool == "Edit":
        return json.dumps({"file_path": path, "old_string": "a", "new_string": "b"})
    if spec.tool == "TodoWrite":
        todos = [{"content": f"task {k}", "status": "pending"} for k in range(3)]
        return json.dumps({"todos": todos})
    return json.dumps({"file_path": path, "pattern": "x"})


def step_messages(spec: StepSpec, n: int) -> list[list[Message]]:
    """The step as the ledger appends it: an optional user message, then the step."""
    out: list[list[Message]] = []
    if spec.user:
        out.append([Message.user(blob(n * 7 + 3, spec.user))])
    calls = tuple(
        ToolCall(f"call_{n}_{i}", c.tool, arguments(c, n)) for i, c in enumerate(spec.calls)
    )
    step = [Message.assistant(blob(n, spec.text) or "working", *calls)]
    for call, c in zip(calls, spec.calls, strict=True):
        text = blob(c.seed, c.size)
        if c.tool == "Bash":
            text += f"\r\nExit code: {1 if c.error else 0}"
        content: str | tuple[Text | Media, ...] = text
        if c.image:
            content = (Text(text), Media("image/png", data=_PNG, size=56))
        step.append(Message.tool(call.id, content, is_error=c.error))
    out.append(step)
    return out


def new_ledger(path: Path) -> tuple[SQLiteLedger, Scope]:
    ledger = open_ledger(path, counter=COUNTER)
    return ledger, ledger.create_session("tenant", "agent", title="generated")


def budget(window: int) -> Budget:
    return Budget.for_window(window, system_tokens=count_message(COUNTER, SYSTEM), tools_tokens=300)


def config(**overrides: object) -> EngineConfig:
    return EngineConfig(counter=COUNTER, **overrides)  # type: ignore[arg-type]


@dataclass
class Turn:
    view: View
    state: EngineState | None  # the state the assembly was given
    assembly: Assembly


def run(
    ledger: SQLiteLedger,
    scope: Scope,
    specs: list[StepSpec],
    bud: Budget,
    cfg: EngineConfig,
) -> tuple[list[Turn], BudgetError | None]:
    """Append each step, assemble, store proposed checkpoints; every turn is returned, with the
    coded error that stopped the run, if one did (LIM-5)."""
    turns: list[Turn] = []
    state: EngineState | None = None
    for n, spec in enumerate(specs):
        for messages in step_messages(spec, n):
            ledger.append(scope, messages)
        view = View.from_ledger(ledger, scope, system=(SYSTEM,))
        try:
            result = assemble(view, bud, cfg, state=state)
        except BudgetError as exc:
            return turns, exc
        turns.append(Turn(view, state, result))
        state = result.next_state
        if result.checkpoint_to_store is not None:
            store_checkpoint(ledger, scope, result.checkpoint_to_store)
    return turns, None


# -- checks --------------------------------------------------------------------------------------


def recount(messages: tuple[Message, ...], system: int) -> int:
    """History tokens recounted independently of the engine's own bookkeeping."""
    total = REPLY_PRIMING
    for m in messages[system:]:
        engine = [p for p in m.parts if isinstance(p, (EvidenceRef, Summary, Checkpoint))]
        rest = Message(m.role, tuple(p for p in m.parts if p not in engine), m.name)
        total += count_message(COUNTER, rest) + sum(
            COUNTER.count(render_engine_part(p)) for p in engine
        )
    return total


def read_all(ledger: SQLiteLedger, scope: Scope, entry_id: int, field: str, digest: str) -> str:
    """Every page from offset 0, following ``next_call`` exactly as a model would."""
    page: EvidencePage = read_evidence(ledger, scope, entry_id, field=field, expected_digest=digest)
    pages = [page.text]
    while page.next_call is not None:
        args = parse_evidence_call(page.next_call)
        assert args.expected_digest == digest and args.offset == page.end
        page = read_evidence(
            ledger,
            scope,
            args.entry,
            field=args.field,
            offset=args.offset,
            expected_digest=args.expected_digest,
        )
        pages.append(page.text)
    text = "".join(pages)
    assert sha256_hex(text) == digest
    return text


_CALL = re.compile(r"EvidenceRead\(entry=\d+[^()\n]*\)")


def check_turn(
    ledger: SQLiteLedger, scope: Scope, turn: Turn, bud: Budget, cfg: EngineConfig
) -> None:
    a, view = turn.assembly, turn.view
    # Fits, by the engine's count and by an independent recount.
    assert a.history_tokens <= bud.history_capacity
    assert recount(a.messages, len(view.system)) == a.history_tokens
    assert a.messages[0] == SYSTEM
    # LIM-4: no pair is split.
    assert open_calls(a.messages) == [] and orphan_results(a.messages) == []
    sent = {eid: m for eid, m in zip(a.entry_ids, a.messages, strict=True) if eid is not None}
    bounded = {x.entry_id for x in a.actions if isinstance(x, Bounded)}
    masked = {x.entry_id for x in a.actions if isinstance(x, MediaReferenced)}
    referenced = {x.entry_id for x in a.actions if isinstance(x, Referenced)}
    by_id = {e.id: e for e in view.entries}
    results = [e for e in view.entries if e.message.tool_result is not None]
    covered = [(x.first_seq, x.last_seq) for x in a.actions if isinstance(x, Checkpointed)]
    # The K newest results and every error are sent as stored (unless too big to send at all).
    # When the K newest alone hold the history over the threshold, the older of them may be
    # referenced (never the newest step's, never an error) or covered by this turn's checkpoint
    # (checked below to read back exactly).
    newest_step = max(e.seq for e in view.entries if e.message.tool_result is None)
    for e in results[-cfg.keep_recent_results :]:
        if any(lo <= e.seq <= hi for lo, hi in covered):
            assert e.id not in sent
            continue
        assert e.id in sent
        if e.id in referenced:
            assert e.seq < newest_step and not e.message.tool_result.is_error  # type: ignore[union-attr]
            continue
        assert e.id in bounded or e.id in masked or sent[e.id] == e.message
    for e in results:
        result = e.message.tool_result
        if result is not None and result.is_error and e.id in sent:
            assert e.id not in referenced
            assert e.id in bounded or e.id in masked or sent[e.id] == e.message
    # Everything referenced, bounded or checkpointed is recovered exactly.
    for x in a.actions:
        if isinstance(x, Referenced):
            stored = by_id[x.entry_id].message.tool_result
            assert stored is not None
            assert read_all(ledger, scope, x.entry_id, "content", x.ref.digest) == stored.text
            assert "EvidenceRead(" in sent[x.entry_id].text
            if any(
                isinstance(p, Media) for p in stored.content if not isinstance(stored.content, str)
            ):
                assert "pixels are not in this context" in sent[x.entry_id].text
        if isinstance(x, MediaReferenced):
            assert "pixels are not in this context" in sent[x.entry_id].text
        if isinstance(x, Checkpointed):
            for e in view.entries:
                out = e.message.tool_result
                if x.first_seq <= e.seq <= x.last_seq and out is not None:
                    assert e.output_digest is not None and e.id not in sent
                    assert read_all(ledger, scope, e.id, "content", e.output_digest) == out.text
    for m in a.messages:
        for call in _CALL.findall(m.text):
            args = parse_evidence_call(call)
            if args.expected_digest is not None:
                read_all(ledger, scope, args.entry, args.field, args.expected_digest)
    # Determinism: the same inputs give the same bytes (durationMs aside).
    again = assemble(view, bud, cfg, state=turn.state)
    assert again == a and again.fingerprint() == a.fingerprint()


def check_sticky(prev: Turn, cur: Turn) -> None:
    """Earlier messages stay byte-identical unless newly referenced this turn."""
    if cur.assembly.checkpoint_to_store is not None:
        return
    for a in (prev.assembly, cur.assembly):
        if "bounded-tail" in str(a.breakdown["stage"]):
            return
    newest_prev = max((e.seq for e in prev.view.entries), default=-1)
    fresh = {
        x.entry_id
        for x in cur.assembly.actions
        if isinstance(x, (Referenced, MediaReferenced)) and x.decided_at > newest_prev
    }
    p, c = prev.assembly, cur.assembly
    assert len(c.messages) >= len(p.messages)
    for i, (pm, cm) in enumerate(zip(p.messages, c.messages, strict=False)):
        assert p.entry_ids[i] == c.entry_ids[i]
        if pm != cm:
            assert c.entry_ids[i] in fresh, f"message {i} changed without a new reference"
