"""Loopback servers for the browser tests: a small site, an origin it must never reach, a
deploy target serving a directory, and a publish target that counts publishes.

All run in threads of the test process on 127.0.0.1 (no network); each counts what it was
asked, so a test can say a refused request never arrived and a publish arrived exactly once.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from _agent_support import reply, text, tool


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def _serve(handler: Any) -> _Server:
    server = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


@dataclass
class Counts:
    hits: list[str] = field(default_factory=list)
    clicks: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _site_handler(counts: Counts, evil: str) -> type[http.server.BaseHTTPRequestHandler]:
    pages = {
        "/start": "<title>Start</title><h1>Sign up</h1><label>Name <input id=name></label>"
        "<button id=go onclick=\"fetch('/clicked',{method:'POST'}).then(()=>"
        "document.querySelector('h1').textContent='Thanks')\">Go</button>",
        "/page": "<title>Landing</title><h1>Landing</h1>",
        "/frame": f"<title>Frame</title><h1>Frame</h1><iframe src='{evil}/framed'></iframe>",
        "/popup": f"<title>Popup</title><button id=pop onclick=\"window.open('{evil}/popped')\">"
        "Pop</button>",
        "/fetcher": f"<title>Fetcher</title><h1 id=h>waiting</h1><script>fetch('{evil}/data')"
        ".then(()=>h.textContent='leaked',()=>h.textContent='refused')</script>",
        "/redir-page": "<title>Chain</title><img src='/img-redir'><h1>Chain</h1>",
        "/download": "<title>Get</title><a id=dl href='/file.txt' download='../../evil.txt'>"
        "get</a>",
        "/file.txt": "report",
        "/socket": "<title>Socket</title><h1 id=h>waiting</h1><script>const s=new WebSocket("
        f"'{evil.replace('http', 'ws')}/sock');s.onclose=()=>h.textContent='closed'</script>",
    }
    redirects = {"/redir": f"{evil}/x", "/redir-ok": "/page", "/img-redir": f"{evil}/img"}

    class Site(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with counts.lock:
                counts.hits.append(self.path)
            if self.path in redirects:
                self.send_response(302)
                self.send_header("Location", redirects[self.path])
                self.end_headers()
                return
            body = pages.get(self.path, "<title>Missing</title>").encode()
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            with counts.lock:
                counts.clicks += 1
                counts.hits.append("POST " + self.path)
            self.send_response(204)
            self.end_headers()

    return Site


def _counting(counts: Counts) -> type[http.server.BaseHTTPRequestHandler]:
    class Evil(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with counts.lock:
                counts.hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"no")

        do_POST = do_GET

    return Evil


@dataclass
class Target:
    """An HTTP resource with ETags; ``publishes`` are the digests of the PUTs it applied,
    ``puts`` every PUT it received (applied or refused)."""

    body: bytes | None = None
    publishes: list[str] = field(default_factory=list)
    puts: int = 0
    reads: int = 0
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def etag(self) -> str | None:
        return None if self.body is None else '"' + hashlib.sha256(self.body).hexdigest() + '"'

    def digest(self) -> str | None:
        return None if self.body is None else "sha256:" + hashlib.sha256(self.body).hexdigest()


def _target_handler(target: Target) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with target.lock:
                target.reads += 1
                body, etag = target.body, target.etag()
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("ETag", str(etag))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PUT(self) -> None:
            data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with target.lock:
                target.puts += 1
                match, none = self.headers.get("If-Match"), self.headers.get("If-None-Match")
                ok = (match is not None and match == target.etag()) or (
                    none == "*" and target.body is None
                )
                if ok:
                    target.body = data
                    target.publishes.append(str(target.digest()))
                else:
                    target.refused += 1
                etag = target.etag()
            self.send_response(201 if ok else 412)
            if ok:
                self.send_header("ETag", str(etag))
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


@dataclass
class World:
    site: str
    evil: str
    deploy_url: str
    deploy_dir: Path
    publish_url: str
    site_counts: Counts
    evil_counts: Counts
    target: Target

    def settings(self, **extra: Any) -> dict[str, Any]:
        chrome = {
            "origins": [self.site],
            "deploy": {"url": self.deploy_url + "/", "dir": str(self.deploy_dir)},
            "publish": {"kind": "http", "url": self.publish_url},
            "tests": ["grep -q Hello dist/index.html"],
            "timeout": 20,
        }
        return {"plugins": ["comal.chrome"], "plugin_settings": {"chrome": chrome | extra}}


@contextmanager
def world(tmp: Path) -> Iterator[World]:
    evil_counts, site_counts, target = Counts(), Counts(), Target()
    evil = _serve(_counting(evil_counts))
    site = _serve(_site_handler(site_counts, _url(evil)))
    deploy_dir = tmp / "deployed"
    deploy_dir.mkdir(parents=True)
    served = partial(_Quiet, directory=str(deploy_dir / "current"))
    deployed = _serve(served)
    publish = _serve(_target_handler(target))
    try:
        yield World(
            _url(site), _url(evil), _url(deployed), deploy_dir, _url(publish) + "/artifact",
            site_counts, evil_counts, target,
        )  # fmt: skip
    finally:
        for s in (evil, site, deployed, publish):
            s.shutdown()
            s.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def workspace(tmp: Path) -> Path:
    root = tmp / "ws"
    (root / "dist").mkdir(parents=True)
    (root / "dist" / "index.html").write_text("<h1>Hello</h1>\n")
    (root / "dist" / "app.js").write_text("console.log('hi')\n")
    return root


def task_script(site: str) -> list[dict[str, Any]]:
    """Open → Fill → Click → Deploy → Publish → Finish, one call a reply."""
    return [
        reply(tool("open1", "ChromeOpen", url=f"{site}/start")),
        reply(tool("fill1", "ChromeFill", selector="#name", value="Ana")),
        reply(tool("click1", "ChromeClick", selector="#go")),
        reply(tool("deploy1", "ChromeDeploy")),
        reply(tool("publish1", "ChromePublish")),
        reply(
            text("Deployed and published."),
            tool("finish1", "ChromeFinish", checks=["test -s dist/app.js"]),
        ),
        reply(text("Done.")),
    ]


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def write_script(path: Path, replies: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in replies))
    return path
