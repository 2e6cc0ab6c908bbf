"""comal inside the OpenAI Agents SDK, offline: ``python examples/openai_agents_session.py``.

The SDK's ``Runner`` runs an agent whose OpenAI client points at ``comal.testing.FakeServer``
(a loopback server speaking the Responses API from a script), with a ``ComalSession``: it gives
the Runner back exactly the items it stored, and ``run_config()`` sends the model comal's
assembly of the ledger. Five large build logs go past an 8,000-token window; a second run, in
a new session object, resumes from the ledger and reads a referenced log back through
``EvidenceRead``. Needs ``pip install 'comal[openai-agents]'``.
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from comal.integrations import ComalSession
from comal.ledger import open_ledger
from comal.testing import FakeServer


@function_tool
def build_log(n: int) -> str:
    """The build log of job n."""
    return "".join(f"job {n} step {i}: compiled unit_{n}_{i}.o in {i * 3} ms\n" for i in range(300))


def use(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}]}


async def run(server: FakeServer, session: ComalSession, prompt: str) -> str:
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key="offline", max_retries=0)
    agent = Agent(
        name="builder",
        instructions="You build jobs.",
        tools=[build_log, *session.tools],
        model=OpenAIResponsesModel("gpt-4.1", client),
    )
    async with client:
        result = await Runner.run(agent, prompt, session=session, run_config=session.run_config())
    return str(result.final_output)


async def main() -> int:
    set_tracing_disabled(True)
    with tempfile.TemporaryDirectory() as tmp, open_ledger(Path(tmp) / "ledger.db") as ledger:
        comal = ComalSession(ledger, window=8_000, settings={"keep_recent_results": 1})
        script = [use("build_log", {"n": n}, f"b{n}") for n in range(1, 6)]
        with FakeServer([*script, {"content": [{"type": "text", "text": "Built 1-5."}]}]) as fake:
            print(await run(fake, comal, "build jobs 1-5"))
            last = str(fake.requests[-1].body["input"])
        for meta in (r.meta for r in ledger.requests(comal.comal.scope)):
            print(f"sent {meta['input_tokens']:>5} of {meta['input_limit']} tokens,"
                  f" stage {meta['stage']}, referenced entries {meta['referenced']}")  # fmt: skip

        # A new session object (a new process, say) resumes from the ledger and reads back the
        # first reference the model was sent.
        entry = re.search(r"EvidenceRead\(entry=(\d+)", last)
        assert entry is not None, "no reference was sent"
        again = ComalSession(ledger, window=8_000, session=comal.session_id)
        recall = use("EvidenceRead", {"entry": int(entry.group(1)), "search": "step 299"}, "r")
        answer = {"content": [{"type": "text", "text": "Job 1 ended at step 299."}]}
        with FakeServer([recall, answer]) as fake:
            print(await run(fake, again, "where did job 1 end?"))
        print(f"the ledger holds {len(again.comal.entries())} entries")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
