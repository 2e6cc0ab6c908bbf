"""Engine parts (evidence references, summaries, checkpoints) sent to providers as text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from comal.messages import (
    Checkpoint,
    EvidenceRef,
    Message,
    Role,
    Summary,
    Text,
    ToolCall,
    sha256_hex,
)
from comal.messages.wire import (
    evidence_read_call,
    from_anthropic,
    from_openai_chat,
    from_openai_responses,
    render_engine_part,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
)

OUTPUT = "line\r\n" * 4000 + "🦀 end"
REF = EvidenceRef(
    entry_id=12,
    field="content",
    digest=sha256_hex(OUTPUT),
    size_utf16=len(OUTPUT.encode("utf-16-le")) // 2,
    lines=4001,
    preview="line\r\nline",
)


def test_evidence_reference_names_entry_digest_and_exact_call() -> None:
    # covers: LED-6
    text = render_engine_part(REF)
    assert f'EvidenceRead(entry=12, field="content", expected_digest="{REF.digest}")' in text
    assert "entry 12" in text
    assert f"sha256 {REF.digest}" in text
    assert f"{REF.size_utf16} UTF-16 units" in text
    assert "line\r\nline" in text
    assert render_engine_part(REF) == text  # deterministic: cached prefixes stay byte-stable


def test_evidence_reference_from_a_child_session_names_it() -> None:
    # covers: LED-6
    ref = EvidenceRef(3, 'out"put', "ab" * 32, 10, 1, "", session="child-1")
    digest = "ab" * 32
    assert evidence_read_call(ref) == (
        f'EvidenceRead(entry=3, field="out\\"put", expected_digest="{digest}", session="child-1")'
    )
    assert "preview" not in render_engine_part(ref)


def test_summary_and_checkpoint_render_their_range() -> None:
    # covers: LED-1
    assert render_engine_part(Summary("did things", depth=1, first_seq=4, last_seq=9)) == (
        "[summary, depth 1, seq 4..9]\ndid things"
    )
    assert render_engine_part(Summary("s")) == "[summary, depth 0]\ns"
    assert render_engine_part(Checkpoint("state", 1, 57)) == "[checkpoint, seq 1..57]\nstate"


Converter = tuple[Callable[[list[Message]], Any], Callable[[Any], list[Message]]]
FORMATS: dict[str, Converter] = {
    "openai_chat": (to_openai_chat, from_openai_chat),
    "openai_responses": (to_openai_responses, from_openai_responses),
    "anthropic": (to_anthropic, from_anthropic),
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_sends_engine_parts_as_text(fmt: str) -> None:
    # covers: LED-6
    to_wire, from_wire = FORMATS[fmt]
    checkpoint = Checkpoint("goal: fix bug", 1, 20)
    messages = [
        Message(Role.USER, (checkpoint, Text("continue"))),
        Message(Role.ASSISTANT, (REF, ToolCall("c1", "f", "{}"))),
        Message.tool("c1", "ok"),
    ]
    back = from_wire(to_wire(messages))
    assert back[0].parts == (Text(render_engine_part(checkpoint)), Text("continue"))
    assert back[1].parts[0] == Text(render_engine_part(REF))
