"""Does the task survive compaction? (``comal bench compare``'s task-state line, ENG-2.)

A scripted coordinator runs under each engine at a small window, as in issue 33: it states its
goal, keeps a board of two items, delegates two work steps (scripted children), waits for the
first, composes a draft from it, then reads large files until its engine compacts. Every
request after the first compaction is checked for what the task is: the operator's
instructions (the system prompt), the goal, both board items, each step's number and child
session (with its status: the first finished and the exact ``EvidenceRead`` of its answer, the
second started and not collected) and the draft's record and sha256. The line says, per
engine, how many of those requests held every item, and which items any of them lacked.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..ledger import Scope, open_ledger
from ..messages.wire import to_anthropic
from ..providers import ModelRequest, Provider
from ..testing import FunctionProvider, ScriptedProvider
from ..tokens import EstimatingCounter

__all__ = ["TaskCheck", "task_checks"]

GOAL = "Port the tokenizer to Rust; keep a board and delegate the two halves."
OPERATOR = "OPERATOR RULE 7: never push to the main branch."
_READS = 12
_MARK = {"limit": "[checkpoint", "dag": "[comal summary ", "pipeline": "[Context restored"}


@dataclass(frozen=True, slots=True)
class TaskCheck:
    engine: str
    window: int
    requests: int  # requests from the first compaction on
    held: int  # of them, those that held every item
    missing: tuple[str, ...]  # items some of them lacked

    def as_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "window": self.window,
            "requests_after_compaction": self.requests,
            "held_everything": self.held,
            "missing": list(self.missing),
        }


def _tool(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def _reply(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"content": list(blocks)}


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def _script() -> list[dict[str, Any]]:
    draft = [{"text": "Lexer:"}, {"step": 1}]
    steps = [
        _reply(
            _tool("b1", "BoardAdd", text="lexer ported"),
            _tool("b2", "BoardAdd", text="parser ported"),
        ),
        _reply(
            _tool("run1", "WorkStepRun", objective="Port the lexer", tools=["Read"]),
            _tool("run2", "WorkStepRun", objective="Port the parser", tools=["Read"]),
        ),
        _reply(_tool("wait1", "WorkStepWait", steps=[1])),
        _reply(_tool("d1", "WorkDraft", title="Port report", parts=draft)),
    ]
    steps += [_reply(_tool(f"r{i}", "Read", path=f"big{i}.txt")) for i in range(_READS)]
    return [*steps, _reply(_text("Stopping here."))]


class _Children:
    """The work steps' models: step n answers from its own script."""

    def __init__(self) -> None:
        self.scripts = {
            1: ScriptedProvider([_reply(_text("The lexer is ported: 412 lines, tests green."))]),
            2: ScriptedProvider([_reply(_text("The parser is ported."))]),
        }

    def spec(self, n: int, requested: str | None) -> str | None:
        return requested or f"step:{n}"

    def provider(self, spec: str | None, scope: Scope) -> Provider:
        assert spec is not None
        return self.scripts[int(spec.rsplit(":", 1)[1])]


def _config(engine: str, counter: EstimatingCounter) -> BaseModel:
    from ..context import get_engine

    settings: dict[str, Any] = {"counter": counter}
    if engine == "dag":
        settings["defer_compaction"] = False  # one process, no background thread to wait for
    return get_engine(engine).config_type.model_validate(settings)


def _sent(req: ModelRequest) -> tuple[str, str]:
    messages = json.dumps(to_anthropic(req.messages), ensure_ascii=False)
    return req.system + "\n" + messages, messages


def _run(engine: str, window: int, root: Path) -> TaskCheck:
    from ..agent import Agent, AgentSettings
    from ..ops import House, Policy, Workspace, default_registry, unguarded
    from ..work import drafts_of, steps_of

    counter = EstimatingCounter()
    (root / "ws").mkdir()
    for i in range(_READS):
        lines = (
            f"module{i}.py line {j}: value {(i * 7919 + j * 104729) % 99991}" for j in range(70)
        )
        (root / "ws" / f"big{i}.txt").write_text("\n".join(lines) + "\n")
    with open_ledger(root / "task.db", counter=counter) as led:
        scope = led.create_session("bench", "task")
        # The bench is the session's only writer: no lock to take around the run.
        house = House.of(led, scope, default_registry(), Policy(mode="trusted"),
                         workspace=Workspace(root / "ws"), guard=unguarded)  # fmt: skip
        script: Iterator[dict[str, Any]] = iter(_script())
        provider = FunctionProvider(lambda req: next(script, _reply(_text("Stopping here."))))
        settings = AgentSettings.for_model(
            "claude-sonnet-4-6", context_window=window, engine=_config(engine, counter),
            engine_name=engine, system=OPERATOR, preamble=False, max_turns=_READS + 8,
        )  # fmt: skip
        Agent(led, scope, provider, house, settings, children=_Children()).run(GOAL)
        found = steps_of(led, scope)
        drafts = drafts_of(led, scope)
        items = {"instructions": OPERATOR, "goal": GOAL, "board item 1": "lexer ported",
                 "board item 2": "parser ported"}  # fmt: skip
        if len(found) == 2 and drafts and found[0].answer_entry is not None:
            one, two = found
            answer = (f'EvidenceRead(session=\\"{one.delegation.child}\\", '
                      f'entry={one.answer_entry}, field=\\"text\\")')  # fmt: skip
            items |= {
                "step 1 and its child": f"#1 child {one.delegation.child}",
                "step 1's answer read": answer,
                "step 2 and its child": f"#2 child {two.delegation.child}",
                "step 2 not collected": "WorkStepWait(steps=[2])",
                "the draft": f"record {drafts[0].record}, sha256 {drafts[0].sha256}",
            }
        else:
            items["the work steps and the draft"] = "\x00never found"
        texts = [_sent(req) for req in provider.calls]
    first = next((n for n, (_, m) in enumerate(texts) if _MARK[engine] in m), None)
    after = [whole for whole, _ in texts[first:]] if first is not None else []
    missing = sorted({k for whole in after for k, v in items.items() if v not in whole})
    held = sum(1 for whole in after if all(v in whole for v in items.values()))
    if first is None:
        missing = ["(the engine never compacted)"]
    return TaskCheck(engine, window, len(after), held, tuple(missing))


def task_checks(
    engines: Sequence[str] = ("limit", "dag", "pipeline"), window: int = 8_000
) -> list[TaskCheck]:
    """One :class:`TaskCheck` per engine at ``window`` (see the module docstring)."""
    out = []
    for engine in engines:
        with tempfile.TemporaryDirectory(prefix="comal-task-") as tmp:
            out.append(_run(engine, window, Path(tmp)))
    return out
