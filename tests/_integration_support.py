"""What every framework adapter's test checks, framework-free: outputs, references, pairs."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from comal.integrations import LedgerSession
from comal.messages import Message

REFERENCE = re.compile(
    r'EvidenceRead\(entry=(\d+), field="content", expected_digest="([0-9a-f]{64})"'
)


def output(n: int) -> str:
    """A large tool output (about 2,500 tokens, under one 8,000-unit page) with bytes a lossy
    path would change: non-ASCII text, a bidi override, a NUL, trailing spaces."""
    words = " ".join(hashlib.sha256(f"{n}:{i}".encode()).hexdigest()[:7] for i in range(700))
    return f"job {n} — résumé\u202e \x00 ok  \n{words}\n"


def references(text: str) -> list[tuple[int, str]]:
    return [(int(e), d) for e, d in REFERENCE.findall(text)]


def assert_pairs_whole(messages: Sequence[Message]) -> None:
    """Every tool result follows the call it answers, and every call before the last message
    has its result."""
    open_calls: set[str] = set()
    for message in messages:
        result = message.tool_result
        if result is not None:
            assert result.call_id in open_calls, f"orphan result {result.call_id}"
            open_calls.discard(result.call_id)
            continue
        assert not open_calls, f"calls without results: {open_calls}"
        open_calls = {c.id for c in message.tool_calls}


def assert_outputs_kept(comal: LedgerSession, outputs: dict[str, str]) -> None:
    """Each original tool output (by call id) is in the ledger byte for byte, once."""
    stored: dict[str, list[str]] = {}
    for entry in comal.entries():
        result = entry.message.tool_result
        if result is not None:
            stored.setdefault(result.call_id, []).append(result.text)
    for call_id, text in outputs.items():
        assert stored.get(call_id) == [text], call_id


def assert_requests_fit(comal: LedgerSession) -> list[dict[str, object]]:
    """Every recorded model call's input fitted its limit; the request records' metas."""
    metas = [r.meta for r in comal.ledger.requests(comal.scope)]
    assert metas
    for meta in metas:
        assert isinstance(meta["input_tokens"], int) and isinstance(meta["input_limit"], int)
        assert meta["input_tokens"] <= meta["input_limit"]
    return metas


def page_text(page: str) -> str:
    """The exact text of one rendered EvidenceRead page (header line and trailer line off)."""
    head, _, rest = page.partition("\n")
    assert head.startswith("[EvidenceRead "), head
    body, _, tail = rest.rpartition("\n")
    assert tail.startswith(("[end of the stored text]", "[next page: ")), tail
    return body
