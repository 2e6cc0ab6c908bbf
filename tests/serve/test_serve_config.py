"""``comal serve`` reads the configuration file, and its recall house is the one factory's.

# covers: CFG-1, OPS-3
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from comal.agent import load_config

from ._support import proxy


def _recall_script() -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = []
    for turn in range(20):
        call = {"type": "tool_use", "id": f"call_{turn}", "name": "run", "input": {"n": turn}}
        script.append({"content": [call]})
    recall = {"type": "tool_use", "id": "call_ev", "name": "EvidenceRead", "input": {"entry": 3}}
    script += [{"content": [recall]}, {"content": "Read it."}]
    return script


@pytest.mark.parametrize("denied", [False, True])
def test_the_proxy_judges_recall_under_the_configuration(tmp_path: Path, denied: bool) -> None:
    # covers: OPS-3, CFG-1 (the proxy judged recall under a bare Policy() and read no config)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"deny": ["EvidenceRead"] if denied else []}))
    operator = load_config(config_file, env={})
    with proxy(tmp_path, _recall_script(), context_window=6_000, operator=operator) as px:
        client = px.openai()
        tools = [
            {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}
        ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        for _ in range(25):
            reply_ = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)  # type: ignore[arg-type]
            message = reply_.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            (call,) = message.tool_calls
            output = "\n".join(f"{i} some output line" for i in range(60))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        (info,) = px.ledger.sessions()
        (receipt,) = px.ledger.records(info.scope, "receipt")
    assert receipt.body["operation"] == "EvidenceRead"
    if denied:
        assert receipt.body["status"] == "denied", receipt.body
        assert "EvidenceRead" in json.dumps(receipt.body["judgment"])
    else:
        assert receipt.body["status"] == "ok"


def test_serve_reads_the_configuration_file(tmp_path: Path) -> None:
    # covers: CFG-1 (comal serve never loaded the configuration file)
    from typer.testing import CliRunner

    from comal.cli import app

    missing = CliRunner().invoke(app, ["serve", "--config", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2 and "CONFIG_NOT_FOUND" in missing.output
    assert "Traceback" not in missing.output
