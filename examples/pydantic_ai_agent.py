"""comal inside a pydantic-ai agent, offline: ``python examples/pydantic_ai_agent.py``.

An agent whose model is pydantic-ai's own ``FunctionModel`` reads six large build logs past a
12,000-token window under comal's ``dag`` engine, which summarizes the older steps; the model
then finds a log with ``ctx_search`` and reads it back exactly with ``EvidenceRead``. A second
agent resumes the session from the ledger. Needs ``pip install 'comal[pydantic-ai]'``.
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from comal.integrations import ComalHistory
from comal.ledger import open_ledger

SETTINGS = {"fresh_tail_turns": 2, "leaf_min_chunk_tokens": 1_000, "leaf_chunk_tokens": 4_000}


def build_log(n: int) -> str:
    """The build log of job n."""
    return "".join(f"job {n} step {i}: linked lib_{n}_{i}.so ({i * 13} KiB)\n" for i in range(150))


def returned(messages: list[ModelMessage], call_id: str) -> str:
    parts = (p for m in messages for p in m.parts if isinstance(p, ToolReturnPart))
    return next(str(p.content) for p in parts if p.tool_call_id == call_id)


asked: list[int] = []


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    # It counts its own calls: what it is sent is comal's assembly, not the whole run.
    asked.append(1)
    calls = len(asked)
    if calls <= 6:
        return ModelResponse(
            parts=[ToolCallPart("build_log", {"n": calls}, tool_call_id=f"b{calls}")]
        )
    if calls == 7:
        args = {"query": "lib_2_149", "kind": "messages"}
        return ModelResponse(parts=[ToolCallPart("ctx_search", args, tool_call_id="s")])
    if calls == 8:
        entry = re.search(r"entry (\d+) \(seq \d+, tool\)", returned(messages, "s"))
        assert entry is not None
        args = {"entry": int(entry.group(1)), "search": "step 149"}
        return ModelResponse(parts=[ToolCallPart("EvidenceRead", args, tool_call_id="r")])
    return ModelResponse(parts=[TextPart("Six builds ran; job 2 linked lib_2_149.so last.")])


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, open_ledger(Path(tmp) / "ledger.db") as ledger:
        comal = ComalHistory(ledger, window=12_000, engine="dag", settings=SETTINGS)
        agent = Agent(FunctionModel(model), capabilities=[comal.capability()], tools=[build_log])
        print(asyncio.run(agent.run("build jobs 1-6")).output)
        for meta in (r.meta for r in ledger.requests(comal.comal.scope)):
            print(f"sent {meta['input_tokens']:>5} of {meta['input_limit']} tokens,"
                  f" stage {meta['stage']}")  # fmt: skip
        print(f"{len(ledger.summaries(comal.comal.scope))} summaries in the ledger")

        again = ComalHistory(ledger, window=12_000, engine="dag", session=comal.session_id)
        seen: list[str] = []

        def resumed(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            seen.append("".join(str(getattr(p, "content", "")) for m in messages for p in m.parts))
            return ModelResponse(parts=[TextPart("Jobs 1-6 were built.")])

        asyncio.run(
            Agent(FunctionModel(resumed), capabilities=[again.capability()]).run("what ran?")
        )
        print(f"resumed: the second model was sent {len(seen[0])} characters from the ledger")
    return 0


if __name__ == "__main__":
    sys.exit(main())
