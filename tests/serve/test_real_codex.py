"""The real Codex CLI through `comal serve` (Responses wire), against a scripted FakeServer.

# covers: LED-1, LIM-2, LIM-3, LIM-4, TOK-1, TOK-3, EVI-1

`codex exec --json` (`@openai/codex`, installed by `make node`) reads a `model_providers`
entry pointing at the proxy with `wire_api = "responses"`. The script makes it run real shell
commands over many turns under a small window, with reasoning (encrypted content that must
come back unchanged) and one EvidenceRead the proxy runs itself. Codex keeps its own rollout
file; every tool output in the ledger is compared byte for byte with it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from comal.agent import Config
from comal.ledger import verify
from comal.messages import Reasoning, Role
from comal.serve import RECALL_EVENT
from comal.serve._turn import EVIDENCE_TOOL

from ._support import assert_pairs_whole, input_tokens, node_tool, proxy, upstream

TURNS = 14
RECALL_AT = 10
WINDOW = 32_000

# The checkpoint path through a real client: with the default settings the engine's
# references alone keep this session under the trigger (they come first since issue 19's
# item 16), and the run would never derive one.
CHECKPOINTING = Config(engine_settings={"yield_protected_to_references": False})


def _seq(turn: int) -> tuple[int, int]:
    return turn * 10000 + 1, turn * 10000 + 1500


def _script() -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = []
    usage = {"input_tokens": 500, "output_tokens": 10}
    for turn in range(TURNS):
        if turn == RECALL_AT:
            # Entry 6: two developer messages, the environment, the prompt, a call, its output.
            call = {"type": "tool_use", "id": "call_recall", "name": EVIDENCE_TOOL}
            script.append({"content": [{**call, "input": {"entry": 6}}], "usage": usage})
        a, b = _seq(turn)
        blocks: list[dict[str, Any]] = []
        if turn % 3 == 0:
            blocks.append(
                {"type": "thinking", "thinking": f"plan {turn}", "signature": f"enc{turn}"}
            )
        blocks.append(
            {
                "type": "tool_use",
                "id": f"call_{turn:02d}",
                "name": "exec_command",
                "input": {"cmd": f"seq {a} {b}"},
            }
        )
        script.append({"content": blocks, "usage": usage})
    script.append({"content": "All done.", "usage": usage})
    return script


def _rollout_outputs(codex_home: Path) -> dict[str, str]:
    outputs: dict[str, str] = {}
    for path in sorted(codex_home.glob("sessions/**/rollout-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            payload = record.get("payload") or {}
            if record.get("type") == "response_item" and payload.get("type") == (
                "function_call_output"
            ):
                outputs[payload["call_id"]] = payload["output"]
    return outputs


def test_codex_runs_many_turns_through_the_proxy(tmp_path: Path) -> None:
    codex = node_tool("codex")
    home = tmp_path / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    with proxy(tmp_path, _script(), context_window=WINDOW, operator=CHECKPOINTING) as px:
        (codex_home / "config.toml").write_text(
            'model = "gpt-5.1-codex"\n'
            'model_provider = "comal"\n'
            'approval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\n'
            "[model_providers.comal]\n"
            'name = "comal"\n'
            f'base_url = "{px.url}/v1"\n'
            'env_key = "COMAL_TEST_KEY"\n'
            'wire_api = "responses"\n'
        )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "CODEX_HOME": str(codex_home),
            "COMAL_TEST_KEY": "anything",
        }
        done = subprocess.run(
            [str(codex), "exec", "--json", "--skip-git-repo-check", "count for me"],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        said = [
            e["item"]["text"] for e in events if e.get("item", {}).get("type") == "agent_message"
        ]
        assert said[-1] == "All done."
        ran = [e["item"] for e in events if e.get("item", {}).get("type") == "command_execution"]
        assert all("EvidenceRead" not in json.dumps(item) for item in ran)
        px.fake.assert_complete()

        led = px.ledger
        sessions = led.sessions()
        assert len(sessions) == 1, [s.meta for s in sessions]
        scope = sessions[0].scope
        entries = led.entries(scope)
        messages = [e.message for e in entries]
        outputs = _rollout_outputs(codex_home)
        stored = {m.tool_result.call_id: m.tool_result for m in messages if m.tool_result}
        assert len(outputs) == TURNS
        for call_id, text in outputs.items():
            assert stored[call_id].content == text  # byte for byte what Codex sent
            _a, b = _seq(int(call_id.split("_")[1]))
            # Codex frames (and over its token budget shortens) the output it sends back.
            assert text.startswith("Chunk ID: ") and text.endswith(f"\n{b}\n")
        signatures = [
            p.data for m in messages for p in m.parts if isinstance(p, Reasoning) and p.data
        ]
        assert signatures == [f"enc{t}" for t in range(0, TURNS, 3)]
        assert messages[-1].role is Role.ASSISTANT and messages[-1].text == "All done."
        assert verify(led).ok

        recall = led.records(scope, "event", kinds=(RECALL_EVENT,))
        assert len(recall) == 1
        assert [r.body["status"] for r in led.records(scope, "receipt")] == ["ok"]

        counter = led.counter
        for recorded in px.fake.requests:
            sent = upstream("openai_responses", recorded)
            assert input_tokens(counter, sent) + (sent.max_tokens or 0) <= WINDOW
            assert_pairs_whole(sent.messages)
        assert led.checkpoints(scope), "the small window must have made the engine checkpoint"
        records = led.requests(scope)
        assert len(records) == len(px.fake.requests)
        assert all(r.new_input is not None for r in records)
