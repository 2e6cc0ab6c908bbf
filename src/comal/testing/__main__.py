"""``python -m comal.testing SCRIPT [--port N]``: FakeServer as an upstream of its own.

A scripted Anthropic / OpenAI look-alike in a process, for what cannot hold one in-process: a
``comal serve`` in front of it, Claude Code or Codex pointed at it, a test in another language.
It answers each request with the next reply of ``SCRIPT`` (the script format of
:mod:`comal.testing`) in the route's wire format, whole or streamed, until it is stopped
(Ctrl-C or SIGTERM); when the script has run out it answers 400 saying so.

It prints one line when it listens (the addresses to give clients), one line on stderr per
request it answers, and on stopping how many requests came and how many replies were left.
Exit codes: 0 when stopped, 2 when the script cannot be read or the port cannot be taken.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from ..errors import ComalError
from ._server import FakeServer

_EPILOG = """example:
  python -m comal.testing replies.jsonl --port 8900 &
  ANTHROPIC_BASE_URL=http://127.0.0.1:8900 ANTHROPIC_API_KEY=fake \\
    comal -p "hello" --model anthropic:claude-sonnet-4-6
  OPENAI_BASE_URL=http://127.0.0.1:8900/v1 OPENAI_API_KEY=fake comal -p hi --model openai:gpt-4.1
"""


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m comal.testing",
        description="Run FakeServer, comal's scripted Anthropic / OpenAI look-alike, on "
        "127.0.0.1 until stopped: each request gets the next reply of SCRIPT.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("script", type=Path, help="a JSON-lines script file (one reply a line)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: free)")
    parser.add_argument("--chunk", type=int, default=5, help="characters per streamed piece")
    parser.add_argument(
        "--models", default="", help="comma-separated names GET /v1/models lists (default: none)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    try:
        fake = FakeServer(args.script, chunk=args.chunk, models=models, port=args.port)
        fake.start()
    except ComalError as exc:
        print(f"error [{exc.code}] {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the port is taken, or not ours to take
        why = exc.strerror or str(exc)
        print(
            f"error: cannot listen on 127.0.0.1:{args.port} ({why}); pick another --port",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(
        f"FakeServer on {fake.base_url}: {fake.remaining} scripted replies; "
        f"ANTHROPIC_BASE_URL={fake.anthropic_base_url} OPENAI_BASE_URL={fake.openai_base_url}",
        flush=True,
    )
    said = 0
    try:
        while not stop.wait(0.05):
            for request in fake.requests[said:]:
                said += 1
                print(f"{said}: {request.method} {request.path}", file=sys.stderr, flush=True)
    finally:
        fake.stop()
    print(f"stopped: {len(fake.requests)} requests, {fake.remaining} replies left", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
