"""Shared helpers for the serve tests: a proxy in front of a FakeServer, and request checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from comal.ledger import SQLiteLedger, open_ledger
from comal.messages import Message, open_calls, orphan_results
from comal.messages.wire import wire_protocol
from comal.serve import ServeConfig, create_app
from comal.serve._run import ServerThread, free_port
from comal.serve._wire import ClientRequest, parse_request
from comal.testing import FakeServer, RecordedRequest
from comal.tokens import count_messages

ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = ROOT / "build" / "node" / "node_modules" / ".bin"


def node_tool(name: str) -> Path:
    """A CLI installed by `make node` (`.ci/run` does it); skip with the reason when absent."""
    path = NODE_BIN / name
    if not path.exists():
        pytest.skip(f"{path} is missing: run `make node` to install the real clients")
    if shutil.which("node") is None:
        pytest.skip(
            "node is not installed: the real Claude Code and Codex run on it (.ci/run installs it)"
        )
    return path


@dataclass
class Proxy:
    fake: FakeServer
    ledger: SQLiteLedger
    server: ServerThread
    config: ServeConfig
    clients: list[Any] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def anthropic(self, **settings: Any) -> anthropic.Anthropic:
        """An official Anthropic client on the proxy, closed with it."""
        settings = {"base_url": self.url, "api_key": "sk", "max_retries": 0, **settings}
        client = anthropic.Anthropic(**settings)
        self.clients.append(client)
        return client

    def openai(self, **settings: Any) -> openai.OpenAI:
        """An official OpenAI client on the proxy, closed with it."""
        settings = {"base_url": f"{self.url}/v1", "api_key": "sk", "max_retries": 0, **settings}
        client = openai.OpenAI(**settings)
        self.clients.append(client)
        return client


@contextmanager
def proxy(tmp_path: Path, script: list[Any], **settings: Any) -> Iterator[Proxy]:
    with FakeServer(script) as fake:
        led = open_ledger(tmp_path / "ledger.db")
        config = ServeConfig(
            upstream_anthropic=fake.anthropic_base_url,
            upstream_openai=fake.openai_base_url,
            **settings,
        )
        app = create_app(config, ledger=led)
        with ServerThread(app) as server:
            px = Proxy(fake, led, server, config)
            try:
                yield px
            finally:
                for client in px.clients:
                    client.close()
        led.close()


def upstream(protocol: str, recorded: RecordedRequest) -> ClientRequest:
    return parse_request(wire_protocol(protocol), recorded.raw)


def input_tokens(counter: Any, request: ClientRequest) -> int:
    total = count_messages(counter, [*request.instructions, *request.messages])
    if request.tools:
        total += counter.count(request.tools_json)
    return total


def assert_pairs_whole(messages: list[Message], *, last_may_be_open: bool = True) -> None:
    """No tool result without its call before it; no call left open but in the last step."""
    assert orphan_results(messages) == []
    pending = open_calls(messages)
    if pending:
        assert last_may_be_open
        last_calls = {c.id for c in messages[-1].tool_calls} if messages else set()
        assert {c.id for c in pending} <= last_calls, pending


def sse_lines(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            out.append(json.loads(line[6:]))
    return out


@dataclass
class AskingAgent:
    """An agent in its own thread and ledger connection, whose Bash call waits for approval."""

    thread: Any
    scope: Any
    result: dict[str, Any]

    def join(self, timeout: float = 30) -> dict[str, Any]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the agent did not finish"
        return self.result


def asking_agent(
    ledger_path: Path, workspace: Path, *, command: str = "echo approved"
) -> AskingAgent:
    import threading

    from comal.agent import Agent, AgentSettings, start_session
    from comal.ops import House, Policy, Workspace, default_registry, unguarded
    from comal.serve import LedgerApprover
    from comal.testing import ScriptedProvider

    script = [
        {
            "content": [
                {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": command}}
            ]
        },
        {"content": "The command ran."},
    ]
    led = open_ledger(ledger_path)
    scope = start_session(led, "local", "coder")
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            house = House.of(
                led,
                scope,
                default_registry(),
                Policy.from_config({"mode": "ask"}),
                workspace=Workspace(workspace),
                approver=LedgerApprover(led, scope, poll=0.05, timeout=60),
                guard=unguarded,  # this agent is the session's only writer
            )
            settings = AgentSettings.for_model("claude-sonnet-4-6", preamble=False)
            agent = Agent(led, scope, ScriptedProvider(script), house, settings)
            outcome = agent.run("run the command")
            result["status"] = outcome.status
            result["answer"] = outcome.answer
        except BaseException as exc:  # reported by the test through result
            result["error"] = repr(exc)
        finally:
            led.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return AskingAgent(thread, scope, result)


def long_session_script(turns: int) -> list[dict[str, Any]]:
    """Replies for :func:`drive_long_session`: one tool call per turn, then an answer."""
    script: list[dict[str, Any]] = []
    for turn in range(turns):
        call = {"type": "tool_use", "id": f"toolu_{turn:03d}", "name": "Bash"}
        call["input"] = {"command": f"seq {turn * 1000} {turn * 1000 + 160}"}
        usage = {
            "input_tokens": 400 + 50 * turn,
            "output_tokens": 20,
            "cache_read_input_tokens": 300,
        }
        script.append(
            {"content": [{"type": "text", "text": f"Turn {turn}."}, call], "usage": usage}
        )
    script.append({"content": "Finished.", "usage": {"input_tokens": 900, "output_tokens": 3}})
    return script


def drive_long_session(url: str, turns: int, *, session: str = "long") -> str:
    """A client loop over the Anthropic route: each tool call answered with a large output."""
    import httpx

    tools = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "count a lot"}]
    sid = ""
    for _ in range(turns + 1):
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 2000,
            "tools": tools,
            "messages": messages,
        }
        r = httpx.post(
            f"{url}/v1/messages", json=body, headers={"x-comal-session": session}, timeout=60
        )
        assert r.status_code == 200, r.text
        sid = r.headers["x-comal-session"]
        reply = r.json()
        messages.append({"role": "assistant", "content": reply["content"]})
        calls = [b for b in reply["content"] if b["type"] == "tool_use"]
        if not calls:
            break
        a, b = (int(x) for x in calls[0]["input"]["command"].split()[1:])
        output = "\n".join(str(i) for i in range(a, b + 1))
        result = {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": output}
        messages.append({"role": "user", "content": [result]})
    return sid


@contextmanager
def serve_process(
    target: str, fake: FakeServer, *options: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``comal serve`` (with ``options``) in a process group of its own on the ledger
    ``target``, in front of ``fake``: its URL and process once it answers. A process still
    running when the block ends is stopped with SIGTERM."""
    port = free_port()
    env = {**os.environ, "COMAL_LEDGER": target}
    args = ["serve", "--port", str(port), "--upstream-anthropic", fake.anthropic_base_url]
    code = "from comal.cli import main; main()"
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args, *options], env=env, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/api/sessions", timeout=1)
                break
            except httpx.HTTPError:
                assert process.poll() is None, "comal serve exited"
                assert time.monotonic() < deadline, "comal serve did not start"
                time.sleep(0.1)
        yield url, process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def run_conversations(
    talk: Callable[[str], list[dict[str, Any]]], names: list[str], timeout: float
) -> dict[str, list[dict[str, Any]]]:
    """``talk(name)`` for every name at once, each on its own thread: the histories the
    clients hold, by name. A client's error fails the caller."""
    held: dict[str, list[dict[str, Any]]] = {}
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            held[name] = talk(name)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(name,)) for name in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not errors, errors
    return held
