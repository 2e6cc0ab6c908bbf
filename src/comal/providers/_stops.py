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
Each protocol's table is a part of its :class:`~comal.messages.wire.WireProtocol` (``stop``);
this function looks the protocol up by name.
"""

from __future__ import annotations

from ..messages.wire import wire_protocol
from ._types import Stop

__all__ = ["normalize_stop"]


def normalize_stop(protocol: str, raw: str | None, detail: str | None = None) -> Stop:
    """The normalized stop for a provider's ``raw`` reason.

    ``protocol`` names a registered wire protocol: ``"anthropic"`` (``stop_reason``),
    ``"openai_chat"`` (``finish_reason``), ``"openai_responses"`` (``status``, with ``detail``
    the ``incomplete_details.reason``), or one a plugin adds; another name raises
    :class:`~comal.messages.wire.UnknownProtocol` (a ``ValueError``).
    """
    return wire_protocol(protocol).stop(raw, detail)
