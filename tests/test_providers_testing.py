"""The fakes users get in ``comal.testing``: scripted providers, script files, the fake server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from comal.errors import ComalError, ContextLength, InputError
from comal.messages import CacheHint, Message, Role, Text, ToolCall
from comal.providers import (
    OUTPUT_LENGTH,
    AnthropicProvider,
    CachePolicy,
    ModelRequest,
    ModelResponse,
    OpenAIChatProvider,
    Provider,
    ProviderRateLimited,
    ProviderRequestError,
    RetryPolicy,
    StreamDone,
    StreamEvent,
    StreamingProvider,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    call_model,
)
from comal.testing import (
    FakeServer,
    FunctionProvider,
    ScriptedProvider,
    ScriptExhausted,
    last_user_text,
    load_script,
)
from comal.tokens import Usage

REQ = ModelRequest(model="m", messages=[Message.user("list the files")])
CALL = {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"dir": "."}}


def test_scripted_provider_follows_the_script() -> None:
    # covers: OUT-1, TOK-1
    provider = ScriptedProvider(
        [
            {"content": [CALL], "usage": {"input_tokens": 5, "output_tokens": 2}},
            {"content": "Two files.", "stop_reason": "end_turn"},
        ]
    )
    assert isinstance(provider, StreamingProvider)
    first, second = provider.request(REQ), provider.request(REQ)
    assert first.stop == "tool_use"
    assert first.message.parts == (ToolCall("toolu_1", "ls", '{"dir":"."}'),)
    assert first.usage.new_input == 5 and first.usage.cache_read is None
    assert second.message == Message.assistant("Two files.") and second.usage.output is None
    assert provider.calls == [REQ, REQ]
    provider.assert_complete()


def test_running_out_is_a_clear_error() -> None:
    # covers: OUT-1
    provider = ScriptedProvider([{"content": "only one"}])
    provider.request(REQ)
    with pytest.raises(ScriptExhausted) as info:
        provider.request(REQ)
    message = str(info.value)
    assert "ran out of replies" in message and "call 2" in message
    assert "'list the files'" in message  # says which request found the script empty
    assert isinstance(info.value, AssertionError) and isinstance(info.value, ComalError)


def test_assert_complete_fails_on_leftovers() -> None:
    # covers: OUT-1
    provider = ScriptedProvider([{"content": "a"}, {"content": "b"}])
    provider.request(REQ)
    with pytest.raises(AssertionError, match="1 unused of 2"):
        provider.assert_complete()


def test_error_entries_and_exceptions_are_raised_in_turn() -> None:
    # covers: OUT-1, OUT-2
    sentinel = RuntimeError("boom")
    provider = ScriptedProvider(
        [
            {"error": "context_length"},
            {"error": "rate_limit"},
            sentinel,
            {"content": "cut", "stop_reason": "max_tokens"},
        ]
    )
    with pytest.raises(ContextLength):
        provider.request(REQ)
    with pytest.raises(ProviderRateLimited):
        provider.request(REQ)
    with pytest.raises(RuntimeError) as info:
        provider.request(REQ)
    assert info.value is sentinel
    cut = provider.request(REQ)
    assert cut.stop == OUTPUT_LENGTH and cut.incomplete


def test_scripted_stream_replays_parts() -> None:
    # covers: OUT-1
    events: list[StreamEvent] = []
    provider = ScriptedProvider([{"content": [{"type": "text", "text": "Listing."}, CALL]}])
    response = call_model(provider, REQ, events.append)
    assert events == [
        TextDelta("Listing."),
        ToolCallStart(0, "toolu_1", "ls"),
        ToolCallDelta(0, "toolu_1", '{"dir":"."}'),
        StreamDone(response),
    ]


def test_call_model_replays_a_provider_that_cannot_stream() -> None:
    # covers: OUT-1
    class Plain:
        def request(self, req: ModelRequest) -> ModelResponse:
            return ScriptedProvider([{"content": "hi"}]).request(req)

    events: list[StreamEvent] = []
    assert isinstance(Plain(), Provider) and not isinstance(Plain(), StreamingProvider)
    response = call_model(Plain(), REQ, events.append)
    assert events == [TextDelta("hi"), StreamDone(response)]
    assert call_model(Plain(), REQ).message.text == "hi"


def test_function_provider() -> None:
    # covers: OUT-1
    def answer(req: ModelRequest) -> dict[str, object]:
        return {"content": f"you said: {last_user_text(req)}"}

    provider = FunctionProvider(answer)
    assert provider.request(REQ).message.parts == (Text("you said: list the files"),)
    assert provider.calls == [REQ]
    given = ModelResponse(Message.assistant("x"), "end_turn", Usage(1, None, None, 1, None))
    assert FunctionProvider(lambda r: given).request(REQ) is given
    with pytest.raises(ContextLength):
        FunctionProvider(lambda r: {"error": "context_length"}).request(REQ)


def test_load_script(tmp_path: Path) -> None:
    # covers: OUT-1
    path = tmp_path / "session.jsonl"
    path.write_text(
        "# a tool call, then the answer\n"
        + json.dumps({"content": [CALL]})
        + "\n\n"
        + json.dumps({"content": "Done.", "usage": {"input_tokens": 3, "output_tokens": 1}})
        + "\n",
        encoding="utf-8",
    )
    assert len(load_script(path)) == 2
    provider = ScriptedProvider(path)
    assert provider.request(REQ).stop == "tool_use"
    assert provider.request(REQ).message.text == "Done."


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not JSON"),
        ('{"content": "a", "stop": "end_turn"}', "unknown keys"),
        ('{"error": "teapot"}', "unknown error"),
        ('{"content": "a", "error": "server"}', "not both"),
        ('{"content": [{"text": "no type"}]}', "'type'"),
    ],
)
def test_load_script_names_the_bad_line(tmp_path: Path, line: str, problem: str) -> None:
    # covers: OUT-1
    path = tmp_path / "bad.jsonl"
    path.write_text('{"content": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=problem) as info:
        load_script(path)
    assert info.value.line == 2 and f"{path}:2" in str(info.value)


# -- FakeServer ---------------------------------------------------------------------------------


def test_fake_server_running_out_answers_clearly() -> None:
    # covers: OUT-1
    with FakeServer([{"content": "one"}]) as server:
        url = server.openai_base_url
        with OpenAIChatProvider(api_key="k", base_url=url, retry=RetryPolicy()) as provider:
            provider.request(REQ)
            with pytest.raises(ProviderRequestError, match="script exhausted"):
                provider.request(REQ)
        assert len(server.requests) == 2  # the refusal is not retried
        server.assert_complete()


def test_fake_server_assert_complete() -> None:
    # covers: OUT-1
    with FakeServer([{"content": "never asked"}]) as server:
        with pytest.raises(AssertionError, match="1 unused"):
            server.assert_complete()


def test_fake_server_refuses_too_many_breakpoints() -> None:
    # covers: CCH-1
    hinted = [Message(Role.USER, (Text(str(i), CacheHint()),)) for i in range(5)]
    with FakeServer([{"content": "kept for later"}]) as server:
        url = server.anthropic_base_url
        with AnthropicProvider(api_key="k", base_url=url, retry=RetryPolicy(attempts=1)) as p:
            with pytest.raises(ProviderRequestError, match="maximum of 4 blocks"):
                p.request(ModelRequest(model="m", messages=hinted, cache=CachePolicy.off()))
        assert server.remaining == 1  # a refused request consumes no reply


def test_fake_server_unknown_route_and_loopback_only() -> None:
    # covers: OUT-1
    with FakeServer() as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        request = urllib.request.Request(f"{server.base_url}/v1/embeddings", data=b"{}")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=5)
        assert info.value.code == 404
        info.value.close()
        assert server.requests[0].path == "/v1/embeddings"
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url


def test_fake_server_takes_a_client_that_hangs_up_mid_reply_quietly(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # A client killed half-way through a streamed reply (the fault runs kill serve workers)
    # leaves FakeServer writing to a reset socket: that is the client's doing, not an error
    # of the server's to print a traceback for.
    import socket
    import struct
    import threading
    import time

    body = json.dumps(
        {"model": "m", "max_tokens": 10, "stream": True,
         "messages": [{"role": "user", "content": "hi"}]}
    ).encode()  # fmt: skip
    with FakeServer([{"content": "x" * 20_000}, {"content": "after"}], chunk=1) as server:
        before = threading.active_count()
        host, port = server.base_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            head = f"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n"
            sock.sendall(head.encode() + b"anthropic-version: 2023-06-01\r\n\r\n" + body)
            assert sock.recv(64).startswith(b"HTTP/1.0 200")  # the reply has begun
            # Close with a reset, as a killed process's socket is: the next write fails.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        deadline = time.monotonic() + 10
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert threading.active_count() == before  # the handler gave up on the dead client
        with AnthropicProvider(api_key="k", base_url=server.anthropic_base_url) as provider:
            reply = provider.request(ModelRequest(model="m", messages=[Message.user("again")]))
        assert reply.message.text == "after"  # and the server goes on serving
    assert len(server.requests) == 2
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err
