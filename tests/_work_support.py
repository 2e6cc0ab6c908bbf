"""Shared helpers for the long-work tests: a coordinator's script with its children's, models for
library agents' work steps, and the counts the kill loop and the CLI tests check."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _agent_support import reply, text, tool
from comal.ledger import LedgerBackend, Scope
from comal.messages import sha256_hex
from comal.ops import receipts
from comal.providers import ModelRequest, ModelResponse, Provider
from comal.testing import ScriptedProvider
from comal.work import DRAFT, drafts_of, render_draft, steps_of

STEPS = "abc"
# What each step writes: the Writes create files, the Edit appends one line to the step's log
# (a duplicated Edit would show as the line twice, or as an Edit that failed).
STEP_WRITES = ("w1", "w2", "w3", "e1")


def step_files(k: str) -> dict[str, str]:
    return {
        f"{k}/one.txt": f"{k}-one\n",
        f"{k}/two.txt": f"{k}-two\n",
        f"{k}/log.txt": f"start\n{k.upper()}\n",
    }


FINAL_FILES = {path: body for k in STEPS for path, body in step_files(k).items()}
FINAL_ANSWER = "Done: the report is drafted."


def step_answer(k: str) -> str:
    return f"step {k}: wrote {k}/one.txt and {k}/two.txt, logged {k.upper()}"


def child_script(k: str) -> list[dict[str, Any]]:
    return [
        reply(
            tool(f"{k}w1", "Write", path=f"{k}/one.txt", content=f"{k}-one\n"),
            tool(f"{k}w2", "Write", path=f"{k}/two.txt", content=f"{k}-two\n"),
            tool(f"{k}w3", "Write", path=f"{k}/log.txt", content="start\n"),
            usage={"input_tokens": 500, "output_tokens": 40},
        ),
        reply(
            tool(
                f"{k}e1",
                "Edit",
                path=f"{k}/log.txt",
                old_string="start\n",
                new_string=f"start\n{k.upper()}\n",
            )
        ),
        reply(text(step_answer(k))),
    ]


def objective(k: str) -> str:
    return f"Write {k}/one.txt and {k}/two.txt, then log {k.upper()} in {k}/log.txt"


def coordinator_script() -> list[dict[str, Any]]:
    tools = ["Write", "Edit", "Read"]
    checks = {k: f"test -f {k}/one.txt && grep -qx {k.upper()} {k}/log.txt" for k in STEPS}
    adds = [tool(f"add{k}", "BoardAdd", text=f"step {k} done", check=checks[k]) for k in STEPS]
    return [
        reply(*adds, usage={"input_tokens": 2000, "output_tokens": 60}),
        # Two steps at once, then the third once they are in.
        reply(
            tool("run1", "WorkStepRun", objective=objective("a"), tools=tools),
            tool("run2", "WorkStepRun", objective=objective("b"), tools=tools),
        ),
        reply(tool("wait12", "WorkStepWait", steps=[1, 2])),
        reply(tool("run3", "WorkStepRun", objective=objective("c"), tools=tools)),
        reply(tool("wait3", "WorkStepWait", steps=[3])),
        reply(
            tool(
                "draft",
                "WorkDraft",
                title="Report",
                parts=[{"text": "Three steps:"}, {"step": 1}, {"step": 2}, {"step": 3}],
            )
        ),
        reply(*[tool(f"done{i}", "BoardUpdate", item=i, status="done") for i in (1, 2, 3)]),
        reply(text(FINAL_ANSWER), tool("fin", "finish_call")),
    ]


def write_lines(path: Path, replies: Sequence[Mapping[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in replies))
    return path


def write_scripts(folder: Path) -> Path:
    """The coordinator's script and, beside it, its children's (``PATH.children/n.jsonl``)."""
    script = write_lines(folder / "coord.jsonl", coordinator_script())
    for n, k in enumerate(STEPS, 1):
        write_lines(folder / "coord.jsonl.children" / f"{n}.jsonl", child_script(k))
    return script


class Kids:
    """Work steps' models for a library agent: step n answers from ``scripts[n]``."""

    def __init__(self, scripts: Mapping[int, Sequence[object] | Provider]) -> None:
        self.providers: dict[int, Provider] = {
            n: s if not isinstance(s, Sequence) else ScriptedProvider(list(s))
            for n, s in scripts.items()
        }

    def spec(self, n: int, requested: str | None) -> str | None:
        return requested or f"kid:{n}"

    def provider(self, spec: str | None, scope: Scope) -> Provider:
        assert spec is not None
        return self.providers[int(spec.rsplit(":", 1)[1])]


class Barrier:
    """A provider that holds each first call until ``parties`` calls are in flight at once
    (proving they run in parallel), then answers from its own script per step."""

    def __init__(self, parties: int, scripts: Mapping[int, Sequence[object]]) -> None:
        self.barrier = threading.Barrier(parties, timeout=20)
        self.waiting = parties  # only the first ``parties`` steps meet at the barrier
        self.scripts = {n: ScriptedProvider(list(s)) for n, s in scripts.items()}
        self.peak = 0
        self._inside = 0
        self._lock = threading.Lock()

    def for_step(self, n: int) -> Provider:
        outer = self

        class _One:
            name = "barrier"
            first = True

            def request(self, req: ModelRequest) -> ModelResponse:
                with outer._lock:
                    outer._inside += 1
                    outer.peak = max(outer.peak, outer._inside)
                try:
                    if self.first:
                        self.first = False
                        with outer._lock:
                            meet = outer.waiting > 0
                            outer.waiting -= 1
                        if meet:
                            outer.barrier.wait()
                    return outer.scripts[n].request(req)
                finally:
                    with outer._lock:
                        outer._inside -= 1

            def stream(self, req: ModelRequest, on_event: Any) -> ModelResponse:
                return self.request(req)

        return _One()


def counts(led: LedgerBackend, scope: Scope, root: Path) -> dict[str, Any]:
    """What the kill loop checks: each child's write receipts, the files, the drafts."""
    out: dict[str, Any] = {"steps": {}, "drafts": len(led.records(scope, "event", kinds=(DRAFT,)))}
    for state in steps_of(led, scope):
        child = state.delegation.scope(scope)
        made = receipts(led, child)
        writes = {}
        for k in STEPS:
            for w in STEP_WRITES:
                statuses = [r.status for r in made if r.call_id == f"{k}{w}"]
                if statuses:
                    writes[f"{k}{w}"] = statuses
        out["steps"][state.delegation.n] = {"outcome": state.outcome, "writes": writes}
    out["files"] = {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".tmp")
    }
    drafts = drafts_of(led, scope)
    out["draft_text"] = render_draft(led, scope, drafts[-1]) if drafts else None
    return out


def applied_once(statuses: Sequence[str]) -> bool:
    """Zero or more proven non-writes, then exactly one write."""
    return statuses[-1] in ("ok", "postcondition_observed") and set(statuses[:-1]) <= {
        "not_applied"
    }


def digest(text: str) -> str:
    return sha256_hex(text)
