"""The connection bounds leave long-lived answers alone: an event stream or a streamed reply
outlives the body deadline (which bounds reading a body, not the answer).

# covers: SRF-1
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from ._support import proxy


def test_an_event_stream_outlives_the_body_deadline(tmp_path: Path) -> None:
    with proxy(tmp_path, [], body_timeout=0.5, header_timeout=0.5) as px:
        started = time.monotonic()
        changes = 0
        with httpx.stream("GET", px.url + "/api/events", params={"interval": 0.05}) as events:
            assert events.status_code == 200
            px.ledger.create_session("local", "coder")
            for line in events.iter_lines():
                changes += line.startswith("data:")
                if time.monotonic() - started > 2.0 and changes >= 2:
                    break
                if changes == 1:
                    time.sleep(1.5)  # past both deadlines, the stream still delivers
                    px.ledger.create_session("local", "coder")
        assert changes >= 2
