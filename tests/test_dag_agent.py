"""The agent running the dag engine, over real HTTP through the Anthropic SDK (DAG-1..8).

The system prompt carries the dag clause; the recall tools are offered and run; after enough
large outputs the engine summarizes inline (``defer_compaction = false``), later requests carry
honest summary headers, and the ledger verifies.
"""

from __future__ import annotations

from pathlib import Path

from _agent_support import MODEL, reply, rig, text, tool
from comal.agent import AgentSettings
from comal.context.dag import DagConfig
from comal.ledger import verify
from comal.providers import AnthropicProvider, RetryPolicy
from comal.testing import FakeServer
from comal.tokens import EstimatingCounter


def test_an_agent_under_the_dag_engine_summarizes_and_recalls(tmp_path: Path) -> None:
    # covers: DAG-1, DAG-6, DAG-7, DAG-8
    steps = [reply(tool(f"b{n}", "Bash", command=f"seq {n} 700")) for n in range(22)]
    steps.append(reply(tool("s1", "ctx_search", query="seq 699")))
    steps.append(reply(text("Done.")))
    config = DagConfig(counter=EstimatingCounter(), defer_compaction=False)
    settings = AgentSettings.for_model(
        MODEL, context_window=32_000, engine=config, engine_name="dag", preamble=False
    )
    r = rig(tmp_path)
    with FakeServer(steps) as server:
        provider = AnthropicProvider(
            api_key="k", base_url=server.anthropic_base_url, retry=RetryPolicy(attempts=1)
        )
        with provider:
            result = r.agent(provider, settings=settings).run("count with seq, then search")
        requests = [q.body for q in server.requests]
    assert result.status == "finished"
    system = requests[0]["system"]
    system_text = system if isinstance(system, str) else " ".join(b["text"] for b in system)
    assert "recall cues, not proof" in system_text
    offered = {t["name"] for t in requests[0]["tools"]}
    assert {"ctx_search", "ctx_inspect", "ctx_expand"} <= offered
    assert r.ledger.summaries(r.scope)  # made inline after a turn
    later = str(requests[-1]["messages"])
    assert "[comal summary " in later and "trust=untrusted" in later
    search = next(e for e in r.ledger.entries(r.scope) if e.message.tool_result is not None
                  and e.message.tool_result.call_id == "s1")  # fmt: skip
    result_text = search.message.tool_result.text  # type: ignore[union-attr]
    assert "ctx_search:" in result_text and "ctx_expand(" in result_text
    assert verify(r.ledger).ok
    r.close()
