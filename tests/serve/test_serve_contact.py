"""What a newcomer met with ``comal serve`` (issue 19): the stage header, ``/v1/models``, a busy
port, the ``--no-dashboard`` flag."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from comal.ledger import open_ledger
from comal.serve import ServeConfig, create_app
from comal.serve._run import ServerThread
from comal.testing import FakeServer

from ._support import long_session_script, proxy


def test_the_stage_header_says_a_checkpoint_still_stands_in(tmp_path: Path) -> None:
    # covers: LIM-1, LIM-3, OBS-1
    turns = 40  # enough references pile up for a checkpoint to stand in
    tools = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "count a lot"}]
    stages: list[str] = []
    with proxy(tmp_path, long_session_script(turns), context_window=6_000) as px:
        for _ in range(turns + 1):
            body = {"model": "claude-sonnet-4-5", "max_tokens": 2000, "tools": tools}
            r = httpx.post(
                f"{px.url}/v1/messages",
                json=body | {"messages": messages},
                headers={"x-comal-session": "long"},
                timeout=60,
            )
            assert r.status_code == 200, r.text
            stages.append(r.headers["x-comal-stage"])
            reply = r.json()
            messages.append({"role": "assistant", "content": reply["content"]})
            calls = [b for b in reply["content"] if b["type"] == "tool_use"]
            if not calls:
                break
            a, b = (int(x) for x in calls[0]["input"]["command"].split()[1:])
            output = "\n".join(str(i) for i in range(a, b + 1))
            result = {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": output}
            messages.append({"role": "user", "content": [result]})
        (info,) = px.ledger.sessions()
        records = px.ledger.requests(info.scope)
    assert len(records) == len(stages)
    standing = [
        (stage, r.meta) for stage, r in zip(stages, records, strict=True) if r.meta["checkpoint"]
    ]
    # The turns after the one that derived the checkpoint send it in place of older history.
    assert any(not meta["checkpoint_new"] for _, meta in standing), "no turn after a checkpoint"
    for stage, meta in standing:
        assert stage.startswith("checkpoint"), (stage, meta["checkpoint"])
        assert meta["stage"] == stage
    for stage, r in zip(stages, records, strict=True):
        if stage == "verbatim":
            assert r.meta["checkpoint"] is None and not r.meta["referenced"]


def _options(command: Any, path: str) -> list[tuple[str, str]]:
    found = [(path, name) for p in command.params for name in (*p.opts, *p.secondary_opts)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _options(sub, f"{path} {name}")
    return found


def test_no_flag_is_spelled_no_no() -> None:
    # covers: CFG-1
    import typer
    from typer.testing import CliRunner

    from comal.cli import app
    from comal.cli._root import agent_app

    spelled = _options(typer.main.get_command(app), "comal")
    spelled += _options(typer.main.get_command(agent_app), "comal agent")
    assert ("comal serve", "--no-dashboard") in spelled
    assert [s for s in spelled if s[1].startswith("--no-no-")] == []
    shown = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200).stdout
    assert "--no-dashboard" in shown and "--no-no-" not in shown


def test_a_busy_port_is_a_coded_error_before_the_banner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: CFG-1
    from comal.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as done:
            main(["serve", "--ledger", str(tmp_path / "l.db"), "--port", str(port)])
    said = capsys.readouterr()
    assert done.value.code == 2
    assert "[ADDRESS_IN_USE]" in said.err and f"127.0.0.1:{port}" in said.err, said.err
    assert "--port" in said.err  # what to do about it
    assert "comal serve on" not in said.err + said.out  # no banner for a server that never ran
    assert "Errno" not in said.err and "Traceback" not in said.err


@contextmanager
def _served(tmp_path: Path, models: tuple[str, ...]) -> Iterator[tuple[FakeServer, str]]:
    with FakeServer(models=models) as fake:
        led = open_ledger(tmp_path / "l.db")
        config = ServeConfig(
            upstream_anthropic=fake.anthropic_base_url, upstream_openai=fake.openai_base_url
        )
        with ServerThread(create_app(config, ledger=led)) as server:
            yield fake, server.url
        led.close()


def test_models_are_the_upstreams_through_the_openai_sdk(tmp_path: Path) -> None:
    # covers: INT-2
    import openai

    with _served(tmp_path, ("gpt-upstream-1", "gpt-upstream-2")) as (fake, url):
        with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-client", max_retries=0) as client:
            listed = [m.id for m in client.models.list()]
        assert listed == ["gpt-upstream-1", "gpt-upstream-2"]
        (sent,) = fake.requests
        assert (sent.method, sent.path) == ("GET", "/v1/models")
        assert sent.headers["authorization"] == "Bearer sk-client"  # the client's key went on


def test_models_fall_back_to_the_catalog_when_the_upstream_has_none(tmp_path: Path) -> None:
    # covers: INT-2, TOK-3
    import anthropic
    import openai

    with _served(tmp_path, ()) as (_, url):
        with openai.OpenAI(base_url=f"{url}/v1", api_key="sk", max_retries=0) as client:
            page = client.models.with_raw_response.list()
            listed = [m.id for m in page.parse()]
            assert page.headers["x-comal-models"] == "catalog"
            assert client.models.retrieve("gpt-4.1").id == "gpt-4.1"
            with pytest.raises(openai.NotFoundError):
                client.models.retrieve("gpt-nonesuch")
        assert "gpt-4.1" in listed and not any(m.startswith("claude") for m in listed)
        with anthropic.Anthropic(base_url=url, api_key="sk", max_retries=0) as claude:
            names = [m.id for m in claude.models.list()]
        assert "claude-sonnet-4-6" in names and not any(n.startswith("gpt") for n in names)
