"""Helpers for the pipeline engine's tests: sessions written step by step into a real ledger,
assembled the way an agent would (plan, execute, assemble), and the checks every turn passes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _context_sessions import COUNTER, SYSTEM, read_all
from comal.compaction import execute
from comal.context import Assembly, EngineCache, View, get_engine
from comal.context.pipeline import PipelineConfig
from comal.ledger import Entry, Scope, SQLiteLedger, open_ledger
from comal.messages import Message, Reasoning, Role, Text, ToolCall, canonical_json, message_to_dict
from comal.tokens import Budget, count_message

ENGINE = get_engine("pipeline")


def cfg(**overrides: Any) -> PipelineConfig:
    """A config whose age-based edits land every turn (the layers' own behaviour under test);
    the shipped default batches them (``edit_stride_turns`` 10)."""
    return PipelineConfig(counter=COUNTER, **({"edit_stride_turns": 1} | overrides))


def budget(window: int, *, system: bool = True) -> Budget:
    tokens = count_message(COUNTER, SYSTEM) if system else 0
    return Budget.for_window(window, system_tokens=tokens, tools_tokens=0)


@dataclass
class Session:
    """A ledger session grown by hand: ``user``, ``step`` (one assistant message and the
    results of its calls), with call ids numbered in order."""

    ledger: SQLiteLedger
    scope: Scope
    calls: int = 0
    entries: list[Entry] = field(default_factory=list)

    @classmethod
    def new(cls, path: Path) -> Session:
        ledger = open_ledger(path, counter=COUNTER)
        return cls(ledger, ledger.create_session("tenant", "agent", title="pipeline"))

    def user(self, text: str) -> Entry:
        made = self.ledger.append(self.scope, [Message.user(text)])
        self.entries += made
        return made[0]

    def step(
        self,
        text: str = "",
        *calls: tuple[str, dict[str, Any], str] | tuple[str, dict[str, Any], str, bool],
        reasoning: str | None = None,
    ) -> list[Entry]:
        made_calls: list[ToolCall] = []
        results: list[Message] = []
        for spec in calls:
            name, args, output = spec[0], spec[1], spec[2]
            error = bool(spec[3]) if len(spec) > 3 else False  # type: ignore[misc]
            self.calls += 1
            call = ToolCall(f"c{self.calls}", name, json.dumps(args))
            made_calls.append(call)
            results.append(Message.tool(call.id, output, is_error=error))
        parts: list[Any] = []
        if reasoning is not None:
            parts.append(Reasoning(reasoning, signature=f"sig-{self.calls}-{len(self.entries)}"))
        if text:
            parts.append(Text(text))
        parts += made_calls
        made = self.ledger.append(self.scope, [Message(Role.ASSISTANT, tuple(parts)), *results])
        self.entries += made
        return made

    def view(self, *, system: bool = True) -> View:
        return View.from_ledger(
            self.ledger, self.scope, system=(SYSTEM,) if system else (), bases=ENGINE.bases
        )

    def assemble(
        self, window: int, config: PipelineConfig | None = None, cache: EngineCache | None = None
    ) -> Assembly:
        return ENGINE.assemble(self.view(), budget(window), config or cfg(), cache=cache)

    def maintain(self, window: int, config: PipelineConfig | None = None) -> tuple[object, ...]:
        """What an agent does after a turn: run the jobs the engine plans."""
        view = self.view()
        jobs = ENGINE.plan(view, budget(window), config or cfg())
        return execute(self.ledger, self.scope, jobs) if jobs else ()


def bash(command: str, output: str, error: bool = False) -> tuple[str, dict[str, Any], str, bool]:
    return ("Bash", {"command": command}, output, error)


def read(path: str, output: str) -> tuple[str, dict[str, Any], str]:
    return ("Read", {"file_path": path}, output)


def lines(seed: int, n: int, width: int = 60) -> str:
    return "\n".join(f"{seed}:{i} " + "x" * width for i in range(n))


def encoded(messages: Iterable[Message]) -> list[str]:
    return [canonical_json(message_to_dict(m)) for m in messages]


def common_messages(a: Sequence[Message], b: Sequence[Message]) -> int:
    """How many leading messages two requests share byte for byte."""
    n = 0
    for x, y in zip(encoded(a), encoded(b), strict=False):
        if x != y:
            break
        n += 1
    return n


def read_back(ledger: SQLiteLedger, scope: Scope, call: str) -> str:
    """Follow an ``EvidenceRead(entry=…, field=…, expected_digest=…)`` call to the whole text."""
    from comal.evidence import parse_evidence_call

    args = parse_evidence_call(call)
    assert args.expected_digest is not None and args.entry is not None
    return read_all(ledger, scope, args.entry, args.field, args.expected_digest)


def pairs_whole(messages: Sequence[Message]) -> bool:
    from comal.messages import open_calls, orphan_results

    return open_calls(messages) == [] and orphan_results(messages) == []


def tail_of(assembly: Assembly) -> Iterator[tuple[int, Message]]:
    """(entry id, message) of every message that stands for a stored entry."""
    for i, m in zip(assembly.entry_ids, assembly.messages, strict=True):
        if i is not None:
            yield i, m
