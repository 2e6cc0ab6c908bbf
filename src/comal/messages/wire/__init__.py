"""Lossless converters between canonical messages and provider wire formats.

Three formats, each as a pair ``to_X(messages)`` / ``from_X(wire)``:

- OpenAI Chat Completions ``messages`` (:func:`to_openai_chat`, :func:`from_openai_chat`);
- OpenAI Responses ``input`` items (:func:`to_openai_responses`, :func:`from_openai_responses`);
- Anthropic Messages requests (:func:`to_anthropic`, :func:`from_anthropic`, and
  :func:`from_anthropic_message` for one response).

For every canonical sequence in a format's *normal form*, ``from_X(to_X(msgs)) == msgs``; for wire
data in normal form, ``to_X(from_X(wire)) == wire`` as JSON values. Tool output strings, reasoning
signatures, encrypted reasoning and cache hints survive byte for byte. Each module's docstring
lists its normal form and every normalisation applied outside it.

Engine parts (evidence references, summaries, checkpoints) have no wire counterpart and are sent
as text rendered by :func:`render_engine_part`. A block or item a converter cannot read is kept
whole as an :class:`~comal.messages.Opaque` part, written back exactly to its own format and as
a placeholder (:func:`render_opaque`) to others. Reasoning is sent only to the provider that wrote
it (``Reasoning.provider`` is one of the ``PROVIDER_*`` tags, or ``None`` for any). Malformed wire
input raises :class:`~comal.errors.InputError` naming the offending path; canonical content a
format cannot carry raises :class:`~comal.errors.UserError`.

Each format is also a :class:`WireProtocol`: one value holding everything comal knows of that
API (its routes, how a request's conversation is read and written, how a reply is read, folded
from a stream and written back, its errors, stop words and model list), registered through the
plugin seam and looked up by name (:func:`wire_protocol`) or route (:func:`protocol_for_route`).
A plugin adds a protocol the same way (``comal_wire_protocols``).
"""

from ._anthropic import (
    RAW_ARGUMENTS_KEY,
    AnthropicBlock,
    AnthropicMessage,
    AnthropicRequest,
    from_anthropic,
    from_anthropic_message,
    to_anthropic,
)
from ._events import Accumulator, Splicer, sse
from ._openai_chat import ChatMessage, from_openai_chat, to_openai_chat
from ._openai_responses import (
    ResponsesItem,
    from_openai_responses,
    is_assistant_item,
    to_openai_responses,
)
from ._protocol import (
    UnknownProtocol,
    WireProtocol,
    protocol_for_headers,
    protocol_for_path,
    protocol_for_route,
    wire_protocol,
    wire_protocols,
)
from ._render import evidence_read_call, render_engine_part, render_opaque
from ._reply import CONTEXT_LENGTH, OUTPUT_LENGTH, Reply, Stop, WireReply, strip_cache
from ._shared import (
    PROVIDER_ANTHROPIC,
    PROVIDER_OPENAI_CHAT,
    PROVIDER_OPENAI_RESPONSES,
    URL_MEDIA_MIME,
)

__all__ = [
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
]
