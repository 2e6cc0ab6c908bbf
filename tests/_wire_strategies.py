"""Hypothesis strategies for canonical message sequences in each wire format's normal form.

Each strategy builds well-formed steps (an assistant message, then one tool message per call, in
call order) from the parts that format can carry, with unicode that includes astral-plane
characters, CRLF and empty strings. The normal forms are documented in the converter modules.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from comal.messages import (
    CacheHint,
    Media,
    Message,
    Part,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolResult,
)
from comal.messages.wire import (
    PROVIDER_ANTHROPIC,
    PROVIDER_OPENAI_CHAT,
    PROVIDER_OPENAI_RESPONSES,
    URL_MEDIA_MIME,
)

# Fast and deterministic enough for the default test run: the whole file stays within seconds.
ROUND_TRIP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Draw = Callable[[st.SearchStrategy[Any]], Any]

TRICKY = [
    "",
    "\r\n",
    "line one\r\nline two\n",
    "🦀 crab, 𝄞 clef, 👩‍💻",
    'quote " backslash \\ tab \t',
    "\u2028\u2029\x00\x7f",
    "  padded  ",
    '{"looks": "like json"}',
]
texts = st.one_of(st.sampled_from(TRICKY), st.text(max_size=24))
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)
opt_names = st.none() | names
base64_data = st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode("ascii"))
urls = st.sampled_from(["https://example.com/a.png", "https://x.test/i?id=1&q=%20", "s3://b/k"])
details = st.sampled_from([None, "low", "high", "auto"])
caches = st.none() | st.builds(CacheHint, st.just("ephemeral"), st.sampled_from([None, "5m", "1h"]))
image_mimes = st.sampled_from(["image/png", "image/jpeg", "image/webp", "image/gif"])

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_object_text(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


# Anthropic's normal form for arguments: compact JSON object text, or text that is no JSON object
# (sent wrapped as {"_raw_arguments": text}); the wrapper's own shape must survive too.
anthropic_arguments = st.one_of(
    st.dictionaries(texts, json_values, max_size=4).map(_compact),
    texts.filter(lambda t: not _is_object_text(t)),
    st.sampled_from(['{"_raw_arguments":"x"}', "[1, 2]", "42", "{not json", '{"a": 1}x']),
)
# OpenAI carries arguments as text, so any text at all round-trips.
any_arguments = st.one_of(anthropic_arguments, texts, st.just('{"command": "ls -la"}'))


class _Ids:
    """Unique call ids within one drawn sequence, so every result answers exactly one call."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, prefix: str = "call_") -> str:
        self.n += 1
        return f"{prefix}{self.n:03d}"


@st.composite
def _images(draw: Draw, with_detail: bool) -> Media:
    detail = draw(details) if with_detail else None
    if draw(st.booleans()):
        return Media(draw(image_mimes), data=draw(base64_data), detail=detail)
    return Media(URL_MEDIA_MIME, ref=draw(urls), detail=detail)


openai_media = _images(with_detail=True)


def _step(
    draw: Draw, assistant: list[Part], result_content: st.SearchStrategy[Any], **result: Any
) -> list[Message]:
    calls = [p for p in assistant if isinstance(p, ToolCall)]
    out = [Message(Role.ASSISTANT, tuple(assistant))]
    for call in calls:
        extra = {k: draw(v) for k, v in result.items()}
        out.append(Message(Role.TOOL, (ToolResult(call.id, draw(result_content), **extra),)))
    return out


# -- OpenAI Chat ----------------------------------------------------------------------------------


@st.composite
def chat_sequences(draw: Draw) -> list[Message]:
    ids = _Ids()
    media = openai_media
    cached_text = st.builds(Text, texts, caches)
    msgs: list[Message] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["system", "developer", "user", "step"]))
        if kind == "step":
            parts: list[Part] = []
            if draw(st.booleans()):
                parts.append(Reasoning(draw(texts), provider=PROVIDER_OPENAI_CHAT))
            parts += draw(st.lists(cached_text, max_size=2))
            for _ in range(draw(st.integers(0, 3))):
                call_type = draw(st.sampled_from(["function", "custom"]))
                parts.append(ToolCall(ids(), draw(names), draw(any_arguments), call_type))
            step = _step(
                draw,
                parts,
                texts | st.lists(cached_text | media, max_size=3).map(tuple),
                name=opt_names,
            )
            msgs += [Message(step[0].role, step[0].parts, draw(opt_names)), *step[1:]]
        else:
            allowed = cached_text | media if kind == "user" else cached_text
            parts = draw(st.lists(allowed, max_size=3))
            msgs.append(Message(Role(kind), tuple(parts), draw(opt_names)))
    return msgs


# -- OpenAI Responses -----------------------------------------------------------------------------


@st.composite
def responses_sequences(draw: Draw) -> list[Message]:
    ids = _Ids()
    media = openai_media
    reasoning = st.builds(
        lambda text, summary, data, rid: Reasoning(
            text, data=data, summary=tuple(summary), id=rid, provider=PROVIDER_OPENAI_RESPONSES
        ),
        texts,
        st.lists(texts, max_size=3),
        st.none() | base64_data,
        st.none() | st.from_regex(r"rs_[0-9a-f]{8}", fullmatch=True),
    )
    plain_text = st.builds(Text, texts)
    msgs: list[Message] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["system", "developer", "user", "step"]))
        # Adjacent assistant messages would group into one; a real turn has input in between.
        if kind == "step" and msgs and msgs[-1].role is Role.ASSISTANT:
            msgs.append(Message.user(draw(texts)))
        if kind == "step":
            parts: list[Part] = []
            for _ in range(draw(st.integers(1, 5))):
                which = draw(st.sampled_from(["reasoning", "text", "call"]))
                if which == "reasoning":
                    parts.append(draw(reasoning))
                elif which == "text":
                    parts.append(draw(plain_text))
                else:
                    call_type = draw(st.sampled_from(["function", "custom"]))
                    parts.append(ToolCall(ids(), draw(names), draw(any_arguments), call_type))
            msgs += _step(draw, parts, texts | st.lists(plain_text | media, max_size=3).map(tuple))
        else:
            allowed = plain_text | media if kind == "user" else plain_text
            msgs.append(Message(Role(kind), tuple(draw(st.lists(allowed, max_size=3)))))
    return msgs


# -- Anthropic ------------------------------------------------------------------------------------


@st.composite
def _anthropic_media(draw: Draw) -> Media:
    if draw(st.booleans()):
        return draw(_images(with_detail=False))
    if draw(st.booleans()):
        return Media("application/pdf", data=draw(base64_data))
    return Media("application/pdf", ref=draw(urls))


@st.composite
def anthropic_sequences(draw: Draw) -> list[Message]:
    ids = _Ids()
    media = _anthropic_media()
    cached_text = st.builds(Text, texts, caches)
    thinking = st.builds(
        lambda text, sig: Reasoning(text, signature=sig, provider=PROVIDER_ANTHROPIC),
        texts,
        st.none() | base64_data,
    )
    redacted = st.builds(
        lambda data: Reasoning(data=data, redacted=True, provider=PROVIDER_ANTHROPIC), base64_data
    )
    msgs: list[Message] = []
    if draw(st.booleans()):
        msgs.append(Message(Role.SYSTEM, tuple(draw(st.lists(cached_text, max_size=3)))))
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            # A user message right after tool results merges into their wire message, so it
            # needs at least one block to be seen again.
            after_tool = bool(msgs) and msgs[-1].role is Role.TOOL
            parts = draw(st.lists(cached_text | media, min_size=int(after_tool), max_size=3))
            msgs.append(Message(Role.USER, tuple(parts)))
            continue
        parts = []
        for _ in range(draw(st.integers(0, 5))):
            which = draw(st.sampled_from(["thinking", "redacted", "text", "call"]))
            if which == "thinking":
                parts.append(draw(thinking))
            elif which == "redacted":
                parts.append(draw(redacted))
            elif which == "text":
                parts.append(draw(cached_text))
            else:
                args = draw(anthropic_arguments)
                parts.append(ToolCall(ids("toolu_"), draw(names), args, cache=draw(caches)))
        content = texts | st.lists(cached_text | media, max_size=3).map(tuple)
        msgs += _step(draw, parts, content, is_error=st.booleans(), cache=caches)
    return msgs
