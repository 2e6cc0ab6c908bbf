"""Where each tool output of the original run ended up in a strategy's last request.

Every output that the last request could have carried (each tool result before that call) gets
exactly one fate, the first that holds:

- ``verbatim``: a tool result with the same call id and exactly the original text is in the
  request;
- ``referenced``: the request names the output with an exact reference, an
  ``EvidenceRead(entry=…, field="content", expected_digest=…)`` call (an evidence reference, a
  bounded message's marker, or a checkpoint line) whose digest is the sha256 of the original
  text, and reading it from the store gives the original back;
- ``recoverable``: it is not in the request, but the strategy keeps a store the model can read,
  and paging the entry out of it with ``read_evidence`` (digest-checked against the original)
  gives the original text back exactly;
- ``lost``: none of these; a placeholder or a summary without a reference is lost.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from enum import StrEnum

from ..evidence import EvidenceError, EvidenceSource, read_evidence
from ..ledger import Entry, Scope
from ..messages import Checkpoint, EvidenceRef, Message, Summary, Text, ToolResult, sha256_hex

__all__ = ["Fate", "classify_retention", "read_back", "retention_counts"]

_REFERENCE = re.compile(
    r'EvidenceRead\(entry=(\d+), field="content", expected_digest="([0-9a-f]+)"'
)


class Fate(StrEnum):
    VERBATIM = "verbatim"
    REFERENCED = "referenced"
    RECOVERABLE = "recoverable"
    LOST = "lost"


def _texts(message: Message) -> list[str]:
    out: list[str] = []
    for part in message.parts:
        if isinstance(part, (Text, Checkpoint, Summary)):
            out.append(part.text)
        elif isinstance(part, ToolResult):
            out.append(part.text)
    return out


def _references(request: Sequence[Message]) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    for message in request:
        for part in message.parts:
            if isinstance(part, EvidenceRef) and part.field == "content":
                found.setdefault(part.entry_id, set()).add(part.digest)
        for text in _texts(message):
            if "EvidenceRead(" not in text:
                continue
            for match in _REFERENCE.finditer(text):
                found.setdefault(int(match[1]), set()).add(match[2])
    return found


def read_back(store: EvidenceSource, scope: Scope, entry_id: int, digest: str) -> str | None:
    """The whole stored output of ``entry_id``, paged with ``read_evidence`` and checked against
    ``digest`` on every page; None when it cannot be read or names other bytes."""
    pages: list[str] = []
    offset = 0
    try:
        while True:
            page = read_evidence(store, scope, entry_id, offset=offset, expected_digest=digest)
            pages.append(page.text)
            if page.next_call is None:
                break
            offset = page.end
    except EvidenceError:
        return None
    return "".join(pages)


def classify_retention(
    outputs: Sequence[tuple[Entry, str]],
    request: Sequence[Message],
    store: EvidenceSource | None,
    scope: Scope,
) -> dict[int, Fate]:
    """The fate of each output, by entry id. ``outputs`` pairs each tool-result entry with its
    original text (from the transcript); ``store`` is None for strategies that keep none."""
    shown: dict[str, set[str]] = {}
    for message in request:
        result = message.tool_result
        if result is not None:
            shown.setdefault(result.call_id, set()).add(result.text)
    references = _references(request)
    fates: dict[int, Fate] = {}
    for entry, original in outputs:
        result = entry.message.tool_result
        if result is None:
            raise ValueError(f"entry {entry.id} is not a tool result")
        if original in shown.get(result.call_id, ()):
            fates[entry.id] = Fate.VERBATIM
            continue
        digest = sha256_hex(original)
        readable = store is not None and read_back(store, scope, entry.id, digest) == original
        if readable and digest in references.get(entry.id, ()):
            fates[entry.id] = Fate.REFERENCED
        elif readable:
            fates[entry.id] = Fate.RECOVERABLE
        else:
            fates[entry.id] = Fate.LOST
    return fates


def retention_counts(fates: Mapping[int, Fate]) -> dict[str, int]:
    """How many outputs met each fate, with every fate present (zero when none)."""
    counts = Counter(fates.values())
    return {fate.value: counts.get(fate, 0) for fate in Fate}
