"""A real HTTP server on 127.0.0.1 that answers like Anthropic and OpenAI, from a script.

It listens on an ephemeral loopback port in a background thread (``http.server``), so the
official SDK clients talk to it over real HTTP with nothing patched. Its routes are those of
every registered wire protocol (:func:`comal.messages.wire.protocol_for_route`): ``POST
/v1/messages`` (Anthropic), ``POST /v1/chat/completions`` and ``POST /v1/responses`` (OpenAI),
and any route a plugin's protocol adds; ``"stream": true`` in the body gets server-sent events.
Each request takes the next script entry and renders it in the protocol of its route
(:mod:`._fake_wire`); error entries answer with that provider's real error shape. ``GET
/v1/models`` lists the ``models`` it was given (404 when none were, as for any route it does
not have), in the Anthropic shape for a request with ``anthropic-version``, else OpenAI's. Every
request is recorded, byte for byte, before it is answered; the response's request id is in the
protocol's header (``request-id``, ``x-request-id``).

Like the real APIs it refuses a few malformed requests without consuming an entry (what the
protocol :attr:`~comal.messages.wire.WireProtocol.refuses`): an Anthropic request without
``model``, ``max_tokens`` or ``messages``, or with more than four ``cache_control`` blocks; an
OpenAI request without ``model``. When the script has run out it answers 400 with a message
saying so, which the adapters raise as a request error.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

from ..messages.wire import WireProtocol, protocol_for_headers, protocol_for_route
from ..providers.script import Entry, check_entry, error_reply, load_script
from ._fake_wire import scripted_events, scripted_response

__all__ = ["FakeServer", "RecordedRequest"]

# When the models FakeServer lists were released (2025-01-01): the list shapes want a date.
_RELEASED = 1_735_689_600


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received: ``raw`` is the body's exact bytes, ``headers`` lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes

    @cached_property
    def body(self) -> Any:
        """The body as JSON (``None`` if it is not JSON)."""
        try:
            return json.loads(self.raw)
        except ValueError:
            return None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog of 5 makes concurrent clients wait for SYN retries (1 s).
    request_queue_size = 128
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up mid-reply (killed, or gave up) is not the server's error: the
        # request is recorded, the reply goes nowhere, and there is nothing to print.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server_version = "comal-fake/1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read requests from FakeServer.requests, not from stderr

    @property
    def fake(self) -> FakeServer:
        return cast(_HTTPServer, self.server).fake

    def do_GET(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.fake._record(RecordedRequest("GET", self.path, headers, b""))
        names = self.fake.models
        protocol = protocol_for_headers(headers)
        lists = protocol is not None and protocol.model is not None and protocol.models is not None
        if self.path.split("?", 1)[0] != "/v1/models" or not names or not lists:
            self._json(404, {}, {"error": {"message": f"FakeServer has no route {self.path}"}})
            return
        assert protocol is not None and protocol.model is not None and protocol.models is not None
        data = [protocol.model(n, "fake", _RELEASED) for n in names]
        self._json(200, {}, protocol.models(data))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        recorded = RecordedRequest("POST", self.path, headers, raw)
        number = self.fake._record(recorded)
        rid = f"req_fake_{number}"
        protocol = protocol_for_route(self.path.split("?", 1)[0])
        if protocol is None:
            self._json(404, {}, {"error": {"message": f"FakeServer has no route {self.path}"}})
            return
        id_header = {protocol.request_id: rid}
        body = recorded.body
        problem = (
            protocol.refuses(body)
            if isinstance(body, dict)
            else "the request body is not a JSON object"
        )
        if problem is not None:
            self._refuse(protocol, id_header, problem)
            return
        entry = self.fake._next_entry()
        if entry is None:
            self._refuse(
                protocol,
                id_header,
                f"FakeServer script exhausted: request {number} ({self.path}) came after every "
                "scripted reply was used; add a reply or check why the client kept calling",
            )
            return
        if "error" in entry:
            status, extra, payload = error_reply(entry, protocol)
            self._json(status, {**id_header, **extra}, payload)
            return
        model = str(body.get("model") or "")
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = scripted_events(protocol, entry, rid, model, self.fake.chunk, usage)
            self._sse(id_header, events)
        else:
            self._json(200, id_header, scripted_response(protocol, entry, rid, model))

    def _refuse(self, protocol: WireProtocol, headers: dict[str, str], message: str) -> None:
        self._json(400, {**headers, "x-should-retry": "false"}, protocol.error(400, message))

    def _json(self, status: int, headers: dict[str, str], payload: object) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, headers: dict[str, str], events: Iterator[bytes]) -> None:
        # HTTP/1.0: the body ends when the connection closes, as an event stream may.
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        for event in events:
            self.wfile.write(event)
            self.wfile.flush()


class FakeServer:
    """A scripted Anthropic / OpenAI look-alike on ``127.0.0.1`` (use as a context manager).

    ``script`` is a sequence of entries or a script file (format in :mod:`comal.testing`);
    ``chunk`` is the length of the pieces streamed strings are cut into; ``models`` the names
    ``GET /v1/models`` lists; ``port`` where it listens (0: a free one, the default). Point
    clients at :attr:`anthropic_base_url` or :attr:`openai_base_url`; read :attr:`requests`
    afterwards. ``python -m comal.testing SCRIPT --port N`` runs one as a process of its own.
    """

    def __init__(
        self,
        script: Iterable[object] | str | Path = (),
        *,
        chunk: int = 5,
        models: Iterable[str] = (),
        port: int = 0,
    ) -> None:
        self.models = tuple(models)
        self.port = port
        source = load_script(script) if isinstance(script, (str, Path)) else script
        self._entries: list[Entry] = [check_entry(e) for e in source]
        self._next = 0
        self._lock = threading.Lock()
        self.chunk = max(chunk, 1)
        self.requests: list[RecordedRequest] = []
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._httpd is not None:
            return
        httpd = _HTTPServer(("127.0.0.1", self.port), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeServer is not running; use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    # -- script ---------------------------------------------------------------------------------

    def add(self, *entries: object) -> None:
        """Append entries to the script."""
        checked = [check_entry(e) for e in entries]
        with self._lock:
            self._entries.extend(checked)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._entries) - self._next

    def assert_complete(self) -> None:
        """Fail when entries are left over: fewer requests came than the script expects."""
        if self.remaining:
            raise AssertionError(
                f"FakeServer has {self.remaining} unused script entries after "
                f"{len(self.requests)} requests; the client stopped early or never called"
            )

    def _record(self, request: RecordedRequest) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests)

    def _next_entry(self) -> Entry | None:
        with self._lock:
            if self._next >= len(self._entries):
                return None
            entry = self._entries[self._next]
            self._next += 1
            return entry
