"""Provider usage reports, normalized into one shape (TOK-1).

Every provider reports the tokens of a request differently. :class:`Usage` keeps five numbers and
one rule: a count the provider did not report is ``None``, never ``0`` — "unknown is not observed
zero". A budget, a spend guard or a display can then tell a free cache hit from a provider that
simply does not say.

Meaning of the fields, whatever the protocol:

``new_input``
    prompt tokens that were neither read from nor written to a prompt cache.
``cache_read``
    prompt tokens served from the provider's prompt cache.
``cache_write``
    prompt tokens written to the cache by this request (Anthropic ``cache_creation``). OpenAI and
    Gemini do not report writes, so it is ``None`` for them.
``output``
    every generated token the provider bills as output, *including* reasoning/thinking tokens.
``reasoning``
    the reasoning part of ``output`` when the provider reports it separately (OpenAI, Gemini,
    Codex); ``None`` for Anthropic, which folds thinking into ``output_tokens`` without a split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..errors import InputError

__all__ = ["PROTOCOLS", "Usage", "normalize_usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one model request; ``None`` means the provider did not report it."""

    new_input: int | None
    cache_read: int | None
    cache_write: int | None
    output: int | None
    reasoning: int | None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"Usage.{f.name} must be a non-negative int or None, not {value!r}"
                )

    @property
    def input_total(self) -> int | None:
        """The size of the prompt: ``new_input + cache_read + cache_write``.

        ``None`` when ``new_input`` is unknown. An unknown cache part counts as nothing: every
        protocol we normalize puts its whole prompt into the known fields (OpenAI's
        ``prompt_tokens`` already includes cached tokens and it has no write count), so a missing
        cache number means "not split out", not "missing tokens".
        """
        if self.new_input is None:
            return None
        return self.new_input + (self.cache_read or 0) + (self.cache_write or 0)

    def to_dict(self) -> dict[str, int | None]:
        """JSON-able form; keys are the field names, unknowns stay ``None`` (JSON ``null``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Usage:
        """Inverse of :meth:`to_dict`; absent keys are unknown. Raises :class:`InputError`."""
        if not isinstance(d, Mapping):
            raise InputError(f"usage must be a JSON object, not {type(d).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(names))
        if unknown:
            raise InputError(
                f"unknown usage keys {unknown}; expected only {names}", field=unknown[0]
            )
        return cls(*(_count(d, name) for name in names))


def _count(raw: Mapping[str, Any], key: str) -> int | None:
    """Read one token count: absent or null is unknown; anything but a whole number >= 0 fails."""
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(
            f"expected a non-negative whole number of tokens, got {value!r}; "
            "pass the provider's usage object unchanged",
            field=key,
        )
    return value


def _sub(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"expected an object, got {type(value).__name__}", field=key)
    return value


def _first(raw: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        if raw.get(key) is not None:
            return _count(raw, key)
    return None


def _minus(total: int | None, part: int | None, field: str) -> int | None:
    if total is None or part is None:
        return total
    if part > total:
        raise InputError(f"cached tokens ({part}) exceed the prompt total ({total})", field=field)
    return total - part


def _anthropic(raw: Mapping[str, Any]) -> Usage:
    # input_tokens is already the uncached remainder; the prompt is the sum of the three.
    cache_write = _count(raw, "cache_creation_input_tokens")
    if cache_write is None and "cache_creation" in raw:
        split = _sub(raw, "cache_creation")
        parts = [
            _count(split, k) for k in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
        ]
        known = [p for p in parts if p is not None]
        cache_write = sum(known) if known else None
    return Usage(
        new_input=_count(raw, "input_tokens"),
        cache_read=_count(raw, "cache_read_input_tokens"),
        cache_write=cache_write,
        output=_count(raw, "output_tokens"),
        reasoning=None,
    )


def _openai_chat(raw: Mapping[str, Any]) -> Usage:
    prompt = _count(raw, "prompt_tokens")
    hit = _count(raw, "prompt_cache_hit_tokens")
    miss = _count(raw, "prompt_cache_miss_tokens")
    if hit is not None:
        # DeepSeek reports the split directly; trust it over prompt_tokens_details.
        new_input = miss if miss is not None else _minus(prompt, hit, "prompt_cache_hit_tokens")
        cache_read: int | None = hit
    else:
        cache_read = _count(_sub(raw, "prompt_tokens_details"), "cached_tokens")
        # Without a cached split the whole prompt is reported as new input so the total stays
        # right; cache_read stays None because the split is genuinely unknown.
        new_input = _minus(prompt, cache_read, "prompt_tokens_details.cached_tokens")
    return Usage(
        new_input=new_input,
        cache_read=cache_read,
        cache_write=None,
        output=_count(raw, "completion_tokens"),
        reasoning=_count(_sub(raw, "completion_tokens_details"), "reasoning_tokens"),
    )


def _openai_responses(raw: Mapping[str, Any]) -> Usage:
    if isinstance(raw.get("info"), Mapping):
        raw = _sub(raw, "info")  # a whole Codex ``token_count`` event payload
    if isinstance(raw.get("last_token_usage"), Mapping):
        # A Codex ``token_count`` info object: the per-call numbers are in last_token_usage;
        # total_token_usage is a running sum over the session and not one request.
        raw = _sub(raw, "last_token_usage")
    prompt = _count(raw, "input_tokens")
    if "cached_input_tokens" in raw or "reasoning_output_tokens" in raw:
        # Codex CLI flattens the details: input_tokens includes cached_input_tokens and
        # output_tokens includes reasoning_output_tokens (total_tokens = input + output).
        cached = _count(raw, "cached_input_tokens")
        reasoning = _count(raw, "reasoning_output_tokens")
        cached_field = "cached_input_tokens"
        written = None
    else:
        details = _sub(raw, "input_tokens_details")
        cached = _count(details, "cached_tokens")
        reasoning = _count(_sub(raw, "output_tokens_details"), "reasoning_tokens")
        cached_field = "input_tokens_details.cached_tokens"
        # Newer Responses reports count cache writes too; older ones leave them unknown.
        written = _count(details, "cache_write_tokens") if "cache_write_tokens" in details else None
    new_input = _minus(prompt, cached, cached_field)
    if new_input is not None and written is not None:
        new_input = max(0, new_input - written)
    return Usage(
        new_input=new_input,
        cache_read=cached,
        cache_write=written,
        output=_count(raw, "output_tokens"),
        reasoning=reasoning,
    )


def _gemini(raw: Mapping[str, Any]) -> Usage:
    for wrapper in ("usageMetadata", "usage_metadata"):
        if isinstance(raw.get(wrapper), Mapping):
            raw = _sub(raw, wrapper)
    prompt = _first(raw, "promptTokenCount", "prompt_token_count")
    cached = _first(raw, "cachedContentTokenCount", "cached_content_token_count")
    tool_prompt = _first(raw, "toolUsePromptTokenCount", "tool_use_prompt_token_count")
    candidates = _first(raw, "candidatesTokenCount", "candidates_token_count")
    thoughts = _first(raw, "thoughtsTokenCount", "thoughts_token_count")
    if prompt is not None:
        # Gemini's JSON is proto3: a zero count is omitted, not sent. Once the prompt count is
        # present the report is real, so an absent cache or thoughts count is an observed zero.
        cached = cached or 0
        thoughts = thoughts or 0
    new_input = _minus(prompt, cached, "cachedContentTokenCount")
    if new_input is not None and tool_prompt is not None:
        # Tool-use prompt tokens (code execution, search results) are input that
        # promptTokenCount leaves out.
        new_input += tool_prompt
    # candidatesTokenCount excludes thinking; comal's ``output`` includes it, as OpenAI's does.
    output = None if candidates is None else candidates + (thoughts or 0)
    return Usage(
        new_input=new_input,
        cache_read=cached,
        cache_write=None,
        output=output,
        reasoning=thoughts,
    )


_NORMALIZERS: dict[str, Callable[[Mapping[str, Any]], Usage]] = {
    "anthropic": _anthropic,
    "openai_chat": _openai_chat,
    "openai_responses": _openai_responses,
    "gemini": _gemini,
}

PROTOCOLS: tuple[str, ...] = tuple(_NORMALIZERS)


def normalize_usage(protocol: str, raw: Mapping[str, Any]) -> Usage:
    """Normalize a provider's usage object for ``protocol`` into :class:`Usage`.

    ``protocol`` is one of :data:`PROTOCOLS`. ``raw`` is the usage object as the provider sent it
    (Anthropic ``usage``, OpenAI Chat ``usage``, OpenAI Responses ``usage`` or a Codex CLI
    ``token_count`` ``last_token_usage``/``info``, Gemini ``usageMetadata`` in camelCase or the
    Python SDK's snake_case). A whole response carrying the object under ``usage`` (or
    ``usageMetadata``) is accepted too. Raises :class:`~comal.errors.InputError` for an unknown
    protocol or a malformed count.
    """
    normalizer = _NORMALIZERS.get(protocol)
    if normalizer is None:
        raise InputError(
            f"unknown usage protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}",
            field="protocol",
        )
    if not isinstance(raw, Mapping):
        raise InputError(f"usage must be an object, not {type(raw).__name__}", field="usage")
    if protocol != "gemini" and isinstance(raw.get("usage"), Mapping):
        raw = _sub(raw, "usage")
    return normalizer(raw)
