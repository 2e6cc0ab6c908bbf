"""A real HTTP server on 127.0.0.1 that answers like Anthropic and OpenAI, from a script.

It listens on an ephemeral loopback port in a background thread (``http.server``), so the
official SDK clients talk to it over real HTTP with nothing patched. Routes: ``POST
/v1/messages`` (Anthropic), ``POST /v1/chat/completions`` and ``POST /v1/responses`` (OpenAI);
``"stream": true`` in the body gets server-sent events. Each request takes the next script entry
and renders it in the format of its route; error entries answer with that provider's real error
shape. ``GET /v1/models`` lists the ``models`` it was given (404 when none were, as for any
route it does not have), in the Anthropic shape for a request with ``anthropic-version``, else
OpenAI's. Every request is recorded, byte for byte, before it is answered.

Like the real APIs it refuses a few malformed requests without consuming an entry: an Anthropic
request without ``model``, ``max_tokens`` or ``messages``, or with more than four
``cache_control`` blocks; an OpenAI request without ``model``. When the script has run out it
answers 400 with a message saying so, which the adapters raise as a request error.
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

from ..providers.script import Entry, check_entry, error_reply, load_script
from ._fake_wire import (
    anthropic_events,
    anthropic_message,
    chat_chunks,
    chat_completion,
    responses_events,
    responses_object,
)

__all__ = ["FakeServer", "RecordedRequest"]

_ROUTES = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai_chat",
    "/v1/responses": "openai_responses",
}


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


def _count_cache_control(value: object) -> int:
    if isinstance(value, dict):
        own = 1 if "cache_control" in value else 0
        return own + sum(_count_cache_control(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_count_cache_control(v) for v in value)
    return 0


def _invalid(protocol: str, body: Any) -> str | None:
    """Why the real API would refuse ``body`` outright, or ``None``."""
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    required = ("model", "max_tokens", "messages") if protocol == "anthropic" else ("model",)
    for key in required:
        if key not in body:
            return f"{key}: Field required"
    if protocol == "anthropic":
        found = sum(_count_cache_control(body.get(k)) for k in ("tools", "system", "messages"))
        if found > 4:
            return f"A maximum of 4 blocks with cache_control may be provided. Found {found}."
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
        if self.path.split("?", 1)[0] != "/v1/models" or not names:
            self._json(404, {}, {"error": {"message": f"FakeServer has no route {self.path}"}})
            return
        if "anthropic-version" in headers:
            data: list[dict[str, Any]] = [
                {"type": "model", "id": n, "display_name": n, "created_at": "2025-01-01T00:00:00Z"}
                for n in names
            ]
            page = {"data": data, "has_more": False, "first_id": names[0], "last_id": names[-1]}
            self._json(200, {}, page)
            return
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names]
        self._json(200, {}, {"object": "list", "data": data})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        recorded = RecordedRequest("POST", self.path, headers, raw)
        number = self.fake._record(recorded)
        rid = f"req_fake_{number}"
        protocol = _ROUTES.get(self.path.split("?", 1)[0])
        if protocol is None:
            self._json(404, {}, {"error": {"message": f"FakeServer has no route {self.path}"}})
            return
        id_header = {"request-id" if protocol == "anthropic" else "x-request-id": rid}
        body = recorded.body
        problem = _invalid(protocol, body)
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
            self._sse(id_header, self._events(protocol, entry, rid, model, body))
        else:
            self._json(200, id_header, self._whole(protocol, entry, rid, model))

    def _refuse(self, protocol: str, headers: dict[str, str], message: str) -> None:
        error = {"type": "invalid_request_error", "message": message}
        payload: dict[str, Any] = (
            {"type": "error", "error": error}
            if protocol == "anthropic"
            else {"error": {**error, "param": None, "code": None}}
        )
        self._json(400, {**headers, "x-should-retry": "false"}, payload)

    def _whole(self, protocol: str, entry: Entry, rid: str, model: str) -> dict[str, Any]:
        if protocol == "anthropic":
            return anthropic_message(entry, rid, model)
        if protocol == "openai_chat":
            return chat_completion(entry, rid, model)
        return responses_object(entry, rid, model)

    def _events(
        self, protocol: str, entry: Entry, rid: str, model: str, body: dict[str, Any]
    ) -> Iterator[bytes]:
        chunk = self.fake.chunk
        if protocol == "anthropic":
            return anthropic_events(entry, rid, model, chunk)
        if protocol == "openai_chat":
            options = body.get("stream_options") or {}
            return chat_chunks(entry, rid, model, chunk, bool(options.get("include_usage")))
        return responses_events(entry, rid, model, chunk)

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
    ``GET /v1/models`` lists. Point clients at :attr:`anthropic_base_url` or
    :attr:`openai_base_url`; read :attr:`requests` afterwards.
    """

    def __init__(
        self,
        script: Iterable[object] | str | Path = (),
        *,
        chunk: int = 5,
        models: Iterable[str] = (),
    ) -> None:
        self.models = tuple(models)
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
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
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
