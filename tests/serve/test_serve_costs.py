"""What issue 24 took off the request path keeps its behaviour: the listening socket turns
Nagle off on its connections, and an item read before is found by its exact JSON, never by a
look-alike."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Sequence
from typing import Any

from comal.messages import Message
from comal.messages.wire import wire_protocol
from comal.serve._run import free_port, listen_on
from comal.serve._wire import ItemCache, message_key, parse_request


def test_connections_to_the_listening_socket_send_without_nagle() -> None:
    # covers: SCL-2
    sock = listen_on("127.0.0.1", free_port())
    # asyncio turns Nagle off only on sockets whose proto says TCP (accepted ones inherit it).
    assert sock.proto == socket.IPPROTO_TCP

    async def run() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def made(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            raw = writer.get_extra_info("socket")
            accepted.set_result(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(made, sock=sock)
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(accepted, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(run()) != 0


def test_items_read_again_are_the_same_and_look_alikes_are_read_anew() -> None:
    # covers: SCL-2
    cache = ItemCache()
    reads: list[object] = []

    def body(content: object) -> bytes:
        messages = [{"role": "user", "content": content}]
        return json.dumps({"model": "m", "max_tokens": 5, "messages": messages}).encode()

    anthropic = wire_protocol("anthropic")
    first = parse_request(anthropic, body("hello"))
    again = parse_request(anthropic, body("hello"))
    assert again.messages == first.messages
    assert again.keys == [message_key(m) for m in first.messages]

    def read(raw: tuple[Any, ...]) -> Sequence[Message]:
        reads.append(raw)
        return wire_protocol("anthropic").read(raw)

    block = {"type": "text", "text": "x"}
    swapped = {"text": "x", "type": "text"}
    one = cache.get("anthropic", ({"role": "user", "content": [block]},), read)
    two = cache.get("anthropic", ({"role": "user", "content": [block]},), read)
    three = cache.get("anthropic", ({"content": [swapped], "role": "user"},), read)
    assert len(reads) == 2  # the same JSON once; the same value in another key order anew
    assert one.messages == two.messages == three.messages
    assert one.keys == two.keys == three.keys
    chat = cache.get("openai_chat", ({"role": "user", "content": "x"},), lambda raw: [])
    assert chat.messages == ()  # another protocol's item is another item


def test_an_item_read_for_one_tenant_is_read_anew_for_another() -> None:
    # covers: SCL-2, LED-2
    # Found items come back faster: a tenant timing its requests must not learn what another
    # tenant sent, so the same JSON is read again under another tenant's name.
    cache = ItemCache()
    reads: list[object] = []

    def read(raw: tuple[Any, ...]) -> Sequence[Message]:
        reads.append(raw)
        return wire_protocol("anthropic").read(raw)

    item = ({"role": "user", "content": "the same words"},)
    cache.get("anthropic", item, read, "acme")
    cache.get("anthropic", item, read, "acme")
    assert len(reads) == 1
    cache.get("anthropic", item, read, "globex")
    assert len(reads) == 2
