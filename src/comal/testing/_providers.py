"""An in-process fake that asks a function (the one that follows a script is
:class:`comal.providers.script.ScriptedProvider`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..messages import Role
from ..providers import ModelRequest, ModelResponse, OnEvent, replay_events
from ..providers.script import check_entry, error_from_entry, response_from_entry

__all__ = ["FunctionProvider", "last_user_text"]


class FunctionProvider:
    """Answers each call with ``fn(request)``: a :class:`ModelResponse` or an Anthropic-form
    reply entry. Records every request in ``calls``."""

    name = "function"

    def __init__(self, fn: Callable[[ModelRequest], ModelResponse | Mapping[str, Any]]) -> None:
        self.fn = fn
        self.calls: list[ModelRequest] = []

    def request(self, req: ModelRequest) -> ModelResponse:
        self.calls.append(req)
        reply = self.fn(req)
        if isinstance(reply, ModelResponse):
            return reply
        entry = check_entry(reply)
        if "error" in entry:
            raise error_from_entry(entry, self.name)
        return response_from_entry(entry, req.model)

    def stream(self, req: ModelRequest, on_event: OnEvent) -> ModelResponse:
        response = self.request(req)
        replay_events(response, on_event)
        return response


def last_user_text(req: ModelRequest) -> str:
    """The text of the request's last user message ("" without one) — handy inside ``fn``."""
    for msg in reversed(req.messages):
        if msg.role is Role.USER:
            return msg.text
    return ""
