"""The built-in plugin ``comal-wire``: the three wire protocols comal speaks, registered
through the ``comal_wire_protocols`` hook exactly as a plugin registers its own."""

from __future__ import annotations

from ...plugins import hookimpl
from ._anthropic_api import ANTHROPIC
from ._chat_api import CHAT
from ._protocol import WireProtocol
from ._responses_api import RESPONSES

__all__ = ["comal_wire_protocols"]


@hookimpl
def comal_wire_protocols() -> tuple[WireProtocol, ...]:
    return (ANTHROPIC, CHAT, RESPONSES)
