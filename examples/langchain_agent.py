"""comal inside a LangChain v1 agent, offline: ``python examples/langchain_agent.py``.

A ``create_agent`` agent whose model is LangChain's own fake chat model runs a tool four times
with large outputs past an 8,000-token window, then reads one of them back through
``EvidenceRead``; a second agent resumes the session from the ledger. Needs
``pip install 'comal[langchain]'``.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from pydantic import Field

from comal.integrations import ComalMiddleware
from comal.ledger import open_ledger


class ToolCallingFake(GenericFakeChatModel):
    """LangChain's fake chat model, accepting tools and keeping what it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def build_log(n: int) -> str:
    """The build log of job n."""
    return "".join(f"job {n} step {i}: compiled module_{i}.py in {i * 7} ms\n" for i in range(400))


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def script(model: ToolCallingFake) -> Any:
    for n in range(1, 5):
        yield call("build_log", {"n": n}, f"c{n}")
    # Like a real model, read back an output comal stood in for by a reference.
    sent = "\n".join(str(m.content) for m in model.seen[-1])
    entry = re.search(r"EvidenceRead\(entry=(\d+)", sent)
    assert entry is not None, "no reference was sent"
    yield call("EvidenceRead", {"entry": int(entry.group(1)), "search": "step 399"}, "r1")
    yield AIMessage("Four builds ran; job 1 reached step 399.")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, open_ledger(Path(tmp) / "ledger.db") as ledger:
        comal = ComalMiddleware(ledger, window=8_000, settings={"keep_recent_results": 1})
        model = ToolCallingFake(messages=iter(()))
        model.messages = script(model)
        agent = create_agent(model, tools=[build_log], middleware=[comal])
        state = agent.invoke({"messages": [{"role": "user", "content": "build jobs 1-4"}]})
        print(state["messages"][-1].content)
        for meta in (r.meta for r in ledger.requests(comal.comal.scope)):
            print(f"sent {meta['input_tokens']:>5} of {meta['input_limit']} tokens,"
                  f" stage {meta['stage']}, referenced entries {meta['referenced']}")  # fmt: skip

        # A new agent (a new process, say) resumes the session from the ledger.
        again = ComalMiddleware(ledger, window=8_000, session=comal.session_id)
        second = ToolCallingFake(messages=iter([AIMessage("Jobs 1-4 were built.")]))
        create_agent(second, tools=[build_log], middleware=[again]).invoke(
            {"messages": [{"role": "user", "content": "what did you build?"}]}
        )
        print(f"resumed: the second model was sent {len(second.seen[0])} messages; "
              f"the ledger holds {len(again.comal.entries())} entries")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
