"""The public names of ``comal.messages.wire`` are pinned: adding or removing one is a decision."""

from __future__ import annotations

import comal.messages.wire as wire

EXPECTED = {
    "CONTEXT_LENGTH",
    "OUTPUT_LENGTH",
    "PROVIDER_ANTHROPIC",
    "PROVIDER_OPENAI_CHAT",
    "PROVIDER_OPENAI_RESPONSES",
    "RAW_ARGUMENTS_KEY",
    "URL_MEDIA_MIME",
    "Accumulator",
    "AnthropicBlock",
    "AnthropicMessage",
    "AnthropicRequest",
    "ChatMessage",
    "Reply",
    "ResponsesItem",
    "Splicer",
    "Stop",
    "UnknownProtocol",
    "WireProtocol",
    "WireReply",
    "evidence_read_call",
    "from_anthropic",
    "from_anthropic_message",
    "from_openai_chat",
    "from_openai_responses",
    "is_assistant_item",
    "protocol_for_headers",
    "protocol_for_path",
    "protocol_for_route",
    "render_engine_part",
    "render_opaque",
    "sse",
    "strip_cache",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
    "wire_protocol",
    "wire_protocols",
}


def test_exported_members() -> None:
    # covers: LED-1
    public = {name for name in vars(wire) if not name.startswith("_")}
    assert set(wire.__all__) == public == EXPECTED
    assert len(wire.__all__) == len(EXPECTED)
