"""``comal bench recall``: does the evidence of a question survive, in context or by search?

For each LoCoMo conversation (two people over many dated sessions), every turn is appended to a
scratch ledger in order, as one session, with the dag engine's maintenance run inline after
each assistant turn (so its summaries exist). At the end, for every QA item with evidence
(``dia_id`` turns):

- ``in_context``: the share of its evidence turns sent *verbatim* in the active memory the
  engine assembles for the next request under the window (``comal-limit``: the limit engine
  replayed over the same turns with its checkpoints; ``comal-dag``: the dag engine over the
  ledger with its summaries);
- ``recall_at``: the share of its evidence turns among the top k results of
  ``ctx_search(question)`` (any of the words, ranked by the ledger's BM25), counted as the
  LoCoMo paper's evaluation code counts retrieval recall. Under ``comal-dag`` summaries are
  results too and can take a slot (only an entry hit counts); under ``comal-limit`` there are
  none. ``bm25`` is the peer: ``rank_bm25.BM25Okapi`` over the same turns, in this process,
  with the same tokenization (lower-cased word characters), no stemming or stop words.

Across sessions (MEM-2), each conversation is also split into its LoCoMo sessions, each one
session of the same (tenant, agent) in another scratch ledger, run with the dag engine as above
and ended with a forced compaction (``/compact``): its older part is summarized, and so its facts
are remembered first (MEM-1). From a new session of that agent, each question is then asked of
``memory_search`` (memories and the past sessions' entries, fused by rank): ``memory_search``
counts an evidence turn found when it is, or is the source of, one of the top k results;
``memories-only`` and ``sessions-only`` ask each of its two rankings alone. None has an
``in_context``. The dag's summaries aim at 200 tokens there (LoCoMo's sessions are short chats,
under its default 1,200-token leaf target), so each session has something to summarize.

Rows are summed over the files when several are given (``"transcript": "all"``) and broken
down per QA category.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..context import Assembly
from ..context.dag import DagConfig
from ..context.limit import EngineConfig
from ..errors import InputError
from ..ledger import Entry, open_ledger
from ..messages import Message, Role, Text
from ..tokens import EstimatingCounter
from ..turns import ContextSession

__all__ = ["RecallRow", "load_locomo", "run_recall"]

_WORD = re.compile(r"\w+")
STRATEGIES = ("comal-limit", "comal-dag", "bm25")
# Across sessions: memory_search, and each of its two rankings alone (no context assembled).
CROSS = ("memory_search", "memories-only", "sessions-only")
CROSS_PARTS = (("memory_search", True, True), ("memories-only", True, False),
               ("sessions-only", False, True))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int = 0


@dataclass(frozen=True, slots=True)
class Item:
    question: str
    evidence: tuple[str, ...]
    category: str


@dataclass(frozen=True, slots=True)
class Conversation:
    name: str
    speaker_a: str
    turns: tuple[Turn, ...]
    items: tuple[Item, ...]


@dataclass
class _Tally:
    items: int = 0
    in_context: float = 0.0
    recall: dict[int, float] = field(default_factory=dict)

    def add(self, in_context: float | None, found: dict[int, float]) -> None:
        self.items += 1
        self.in_context += in_context or 0.0
        for k, r in found.items():
            self.recall[k] = self.recall.get(k, 0.0) + r

    def merge(self, other: _Tally) -> None:
        self.items += other.items
        self.in_context += other.in_context
        for k, r in other.recall.items():
            self.recall[k] = self.recall.get(k, 0.0) + r

    def as_dict(self, with_context: bool) -> dict[str, Any]:
        n = max(self.items, 1)
        return {
            "items": self.items,
            "in_context": round(self.in_context / n, 4) if with_context else None,
            "recall_at": {str(k): round(v / n, 4) for k, v in sorted(self.recall.items())},
        }


@dataclass
class RecallRow:
    transcript: str
    strategy: str
    window: int
    total: _Tally
    categories: dict[str, _Tally]

    def as_dict(self) -> dict[str, Any]:
        ctx = self.strategy not in ("bm25", *CROSS)
        return {
            "transcript": self.transcript,
            "strategy": self.strategy,
            "window": self.window,
            **self.total.as_dict(ctx),
            "categories": {c: t.as_dict(ctx) for c, t in sorted(self.categories.items())},
        }


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def load_locomo(path: Path) -> list[Conversation]:
    """The conversations of a LoCoMo file (one object, or a list of them)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path} as LoCoMo JSON: {exc}", path=str(path)) from exc
    docs = value if isinstance(value, list) else [value]
    out: list[Conversation] = []
    for n, doc in enumerate(docs):
        conv = doc.get("conversation", doc) if isinstance(doc, dict) else None
        if not isinstance(conv, dict) or "speaker_a" not in conv:
            raise InputError(f"{path}: item {n} is not a LoCoMo conversation", path=str(path))
        numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        turns = [
            Turn(str(t["dia_id"]), str(t["speaker"]), str(t.get("text", "")), num)
            for num in numbers
            for t in conv[f"session_{num}"]
            if isinstance(t, dict) and "dia_id" in t
        ]
        items = []
        for qa in doc.get("qa", []):
            evidence = tuple(
                e for raw in qa.get("evidence", []) for e in re.split(r"[;,\s]+", str(raw)) if e
            )
            if evidence and isinstance(qa.get("question"), str):
                items.append(Item(qa["question"], evidence, str(qa.get("category", "?"))))
        name = path.stem + (f"#{n}" if len(docs) > 1 else "")
        out.append(Conversation(name, str(conv["speaker_a"]), tuple(turns), tuple(items)))
    return out


def _share(evidence: Sequence[str], hits: set[str]) -> float:
    return sum(1 for e in evidence if e in hits) / len(evidence)


def _verbatim(
    assembly_ids: Sequence[int | None], messages: Sequence[Message], by_id: dict[int, Entry]
) -> set[int]:
    return {
        i for i, m in zip(assembly_ids, messages, strict=True)
        if i is not None and i in by_id and by_id[i].message == m
    }  # fmt: skip


def run_conversation(
    conv: Conversation, window: int, ks: Sequence[int], workdir: Path | None = None
) -> list[RecallRow]:
    counter = EstimatingCounter()
    config = DagConfig(counter=counter, defer_compaction=False)
    rows: list[RecallRow] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        led = open_ledger(Path(tmp) / "recall.db", counter=counter)
        scope = led.create_session("bench", "recall", title=conv.name)
        # Each engine's turn service, as an agent with inline compaction runs it, turn after
        # turn over the one session: the dag reads its summaries, the limit engine its
        # checkpoints, so neither sees the other's stand-ins.
        dag = ContextSession(led, scope, "dag", config)
        limit = ContextSession(led, scope, "limit", EngineConfig(counter=counter))
        budget = dag.budget(window, system_tokens=0, tools_tokens=0)
        dia: dict[int, str] = {}
        states: dict[str, object] = {}

        def turn(service: ContextSession) -> Assembly:
            made = service.prepare(budget, state=states.get(service.name)).assembly
            states[service.name] = made.next_state
            return made

        for t in conv.turns:
            role = Role.USER if t.speaker == conv.speaker_a else Role.ASSISTANT
            (entry,) = led.append(scope, [Message(role, (Text(t.text),), t.speaker)])
            dia[entry.id] = t.dia_id
            if role is Role.ASSISTANT:
                turn(dag)
                turn(limit)
        entries = list(led.iter_entries(scope))
        by_id = {e.id: e for e in entries}
        # The active memory each engine assembles for the next request.
        a = turn(dag)
        dag_ctx = {dia[i] for i in _verbatim(a.entry_ids, a.messages, by_id)}
        b = turn(limit)
        limit_ctx = {dia[i] for i in _verbatim(b.entry_ids, b.messages, by_id)}
        from rank_bm25 import BM25Okapi

        order = [e.id for e in entries]
        bm25 = BM25Okapi([_tokens(by_id[i].message.text) or ["\u0000"] for i in order])
        top = max(ks)
        tallies = {s: (_Tally(), dict[str, _Tally]()) for s in STRATEGIES}
        for item in conv.items:
            searched = {
                "comal-limit": led.recall_search(scope, item.question, limit=top, summaries=False),
                "comal-dag": led.recall_search(scope, item.question, limit=top),
            }
            scores = bm25.get_scores(_tokens(item.question))
            ranked = sorted(range(len(order)), key=lambda j: (-scores[j], j))[:top]
            ranked_dia = {"bm25": [dia[order[j]] for j in ranked]}
            for s, hits in searched.items():
                ranked_dia[s] = [dia[h.id] if h.kind == "entry" else "" for h in hits]
            for s in STRATEGIES:
                found = {k: _share(item.evidence, set(ranked_dia[s][:k])) for k in ks}
                ctx = None
                if s == "comal-limit":
                    ctx = _share(item.evidence, limit_ctx)
                elif s == "comal-dag":
                    ctx = _share(item.evidence, dag_ctx)
                total, cats = tallies[s]
                total.add(ctx, found)
                cats.setdefault(item.category, _Tally()).add(ctx, found)
        for s in STRATEGIES:
            total, cats = tallies[s]
            rows.append(RecallRow(conv.name, s, window, total, cats))
        led.close()
    return rows


def run_cross_session(
    conv: Conversation, window: int, ks: Sequence[int], workdir: Path | None = None
) -> list[RecallRow]:
    """The conversation's sessions as sessions of one agent, then ``memory_search`` from a new
    one (see the module docstring)."""
    from ..memory import memory_search

    counter = EstimatingCounter()
    # LoCoMo sessions are short chats: summaries of 200 tokens, so that forced compaction at a
    # session's end has something to summarize (and so to remember first).
    config = DagConfig(counter=counter, defer_compaction=False, leaf_target_tokens=200)
    top = max(ks)
    tallies = {s: (_Tally(), dict[str, _Tally]()) for s in CROSS}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        led = open_ledger(Path(tmp) / "cross.db", counter=counter)
        dia: dict[int, str] = {}
        for number in sorted({t.session for t in conv.turns}):
            scope = led.create_session("bench", "recall", title=f"{conv.name} session {number}")
            service = ContextSession(led, scope, "dag", config)
            budget = service.budget(window, system_tokens=0, tools_tokens=0)
            for t in (t for t in conv.turns if t.session == number):
                role = Role.USER if t.speaker == conv.speaker_a else Role.ASSISTANT
                (entry,) = led.append(scope, [Message(role, (Text(t.text),), t.speaker)])
                dia[entry.id] = t.dia_id
                if role is Role.ASSISTANT:
                    service.prepare(budget)
            service.compact(budget)
        asking = led.create_session("bench", "recall", title=f"{conv.name}: the questions")
        for item in conv.items:
            for s, memories, sessions in CROSS_PARTS:
                found = memory_search(
                    led, "bench", "recall", item.question, session=asking.session, limit=top,
                    memories=memories, sessions=sessions,
                )  # fmt: skip
                ranked = [{dia.get(i, "") for i in r.entry_ids} for r in found]
                hits = {k: _share(item.evidence, set().union(*ranked[:k])) for k in ks}
                total, cats = tallies[s]
                total.add(None, hits)
                cats.setdefault(item.category, _Tally()).add(None, hits)
        led.close()
    return [RecallRow(conv.name, s, window, *tallies[s]) for s in CROSS]


def run_recall(
    paths: Sequence[Path],
    *,
    window: int = 16_000,
    ks: Sequence[int] = (1, 5, 10),
    progress: Callable[[str], None] = lambda _: None,
) -> list[RecallRow]:
    """Rows per conversation and strategy, then one ``"all"`` row per strategy when several."""
    rows: list[RecallRow] = []
    for path in paths:
        for conv in load_locomo(path):
            progress(f"{conv.name}: {len(conv.turns)} turns, {len(conv.items)} questions")
            rows += run_conversation(conv, window, ks)
            progress(f"{conv.name}: across {len({t.session for t in conv.turns})} sessions")
            rows += run_cross_session(conv, window, ks)
    if len({r.transcript for r in rows}) > 1:
        for s in (*STRATEGIES, *CROSS):
            total, cats = _Tally(), dict[str, _Tally]()
            for r in rows:
                if r.strategy == s:
                    total.merge(r.total)
                    for c, t in r.categories.items():
                        cats.setdefault(c, _Tally()).merge(t)
            rows.append(RecallRow("all", s, window, total, cats))
    return rows
