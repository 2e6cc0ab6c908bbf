"""The Anthropic Messages request body, built without the SDK (no I/O, no import of it).

:class:`~comal.providers.AnthropicProvider` sends exactly this; ``comal replay --dump`` writes
it, so a replay shows the bytes the agent sent.
"""

from __future__ import annotations

from typing import Any

from ..messages.wire import AnthropicBlock, AnthropicMessage, to_anthropic
from ._cache import cache_control, mark_history, tool_params
from ._types import CachePolicy, ModelRequest

__all__ = ["anthropic_params"]


def anthropic_params(req: ModelRequest) -> dict[str, Any]:
    """The Messages API body for ``req``, exactly as :class:`AnthropicProvider` sends it (no
    I/O; ``comal replay --dump`` writes it too)."""
    policy = req.cache
    messages = mark_history(req.messages, policy) if policy.enabled else list(req.messages)
    wire = to_anthropic(messages)
    if policy.enabled:
        _as_blocks(wire["messages"])
    params: dict[str, Any] = {
        "model": req.model,
        "max_tokens": req.max_output_tokens,
        "messages": wire["messages"],
    }
    system = _system(req.system, wire.get("system"), policy)
    if system is not None:
        params["system"] = system
    if req.tools:
        hint = policy.hint if policy.enabled else None
        params["tools"] = tool_params(req.tools, hint, "input_schema")
    if req.effort is not None:
        params["output_config"] = {"effort": req.effort}
    if req.temperature is not None:
        params["extra_body"] = {"temperature": req.temperature}
    return params


def _as_blocks(messages: list[AnthropicMessage]) -> None:
    """Send string contents as one text block. The converter writes a lone uncached text as a
    string and a marked one as a block, so without this a message's bytes would change when the
    breakpoint moves past it — and the cached prefix with them."""
    for message in messages:
        content = message["content"]
        if isinstance(content, str) and content:
            message["content"] = [AnthropicBlock(type="text", text=content)]


def _system(text: str, extra: object, policy: CachePolicy) -> str | list[dict[str, Any]] | None:
    """The ``system`` parameter: ``text`` then any leading system messages, marked last."""
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    if isinstance(extra, str):
        if extra:
            blocks.append({"type": "text", "text": extra})
    elif isinstance(extra, list):
        blocks.extend(dict(block) for block in extra)
    if not blocks:
        return None
    if policy.enabled:
        blocks[-1]["cache_control"] = cache_control(policy.hint)
    elif len(blocks) == 1 and "cache_control" not in blocks[0]:
        return text or str(blocks[0]["text"])  # a plain string, exactly as the caller gave it
    return blocks
