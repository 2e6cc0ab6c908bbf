"""Provider stop reasons normalized into :data:`~comal.providers.Stop` (OUT-1).

=====================  =========================================  ======================
normalized             Anthropic ``stop_reason``                  OpenAI
=====================  =========================================  ======================
``end_turn``           ``end_turn``, ``stop_sequence``            ``stop``; Responses
                                                                  ``completed``
``tool_use``           ``tool_use``                               ``tool_calls``,
                                                                  ``function_call``
``OUTPUT_LENGTH``      ``max_tokens``                             ``length``; Responses
                                                                  ``incomplete`` /
                                                                  ``max_output_tokens``
``CONTEXT_LENGTH``     ``model_context_window_exceeded``          —
``refusal``            ``refusal``                                ``content_filter``
``error``              ``pause_turn`` (server tools, which comal  Responses ``failed``,
                       does not send), anything unknown           ``cancelled``, unknown
=====================  =========================================  ======================

A finished turn carrying tool calls becomes ``tool_use`` later, whatever the provider said.
"""

from __future__ import annotations

from typing import Final

from ._types import CONTEXT_LENGTH, OUTPUT_LENGTH, Stop

__all__ = ["normalize_stop"]

_ANTHROPIC: Final[dict[str, Stop]] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": OUTPUT_LENGTH,
    "model_context_window_exceeded": CONTEXT_LENGTH,
    "refusal": "refusal",
}

_OPENAI_CHAT: Final[dict[str, Stop]] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": OUTPUT_LENGTH,
    "content_filter": "refusal",
}

_RESPONSES_INCOMPLETE: Final[dict[str, Stop]] = {
    "max_output_tokens": OUTPUT_LENGTH,
    "content_filter": "refusal",
}


def normalize_stop(protocol: str, raw: str | None, detail: str | None = None) -> Stop:
    """The normalized stop for a provider's ``raw`` reason.

    ``protocol`` is ``"anthropic"`` (``stop_reason``), ``"openai_chat"`` (``finish_reason``) or
    ``"openai_responses"`` (``status``, with ``detail`` the ``incomplete_details.reason``).
    """
    if raw is None:
        return "error"
    if protocol == "anthropic":
        return _ANTHROPIC.get(raw, "error")
    if protocol == "openai_chat":
        return _OPENAI_CHAT.get(raw, "error")
    if protocol == "openai_responses":
        if raw == "completed":
            return "end_turn"
        if raw == "incomplete":
            return _RESPONSES_INCOMPLETE.get(detail or "", "error")
        return "error"
    raise ValueError(f"unknown protocol {protocol!r}")
