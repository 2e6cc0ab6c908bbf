"""A provider that follows a script in process: each call gets the next reply."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ...errors import ComalError
from .._types import ModelRequest, ModelResponse, OnEvent, replay_events
from ._format import Reply, entries, error_from_entry, load_script, response_from_entry

__all__ = ["ScriptExhausted", "ScriptedProvider"]


class ScriptExhausted(ComalError, AssertionError):
    """A fake was asked for more replies than its script holds. Also an ``AssertionError``, so
    a test runner reports it as a failed expectation rather than a crash."""

    code = "SCRIPT_EXHAUSTED"


def _describe(req: ModelRequest) -> str:
    last = req.messages[-1] if req.messages else None
    if last is None:
        return f"model {req.model!r}, no messages"
    text = last.text.replace("\n", " ")
    preview = text if len(text) <= 60 else text[:57] + "..."
    return f"model {req.model!r}, last message {last.role.value}: {preview!r}"


class ScriptedProvider:
    """Answers each call with the next reply of a script; records every request in ``calls``.

    ``replies`` are Anthropic-form entries (see :mod:`comal.providers.script`),
    :class:`ModelResponse` values, or exceptions to raise in their turn; a path reads a script
    file. An ``error`` entry raises the :class:`~comal.providers.ProviderError` the real adapter
    would raise once its retries were spent (``context_length`` raises
    :class:`~comal.errors.ContextLength`).
    """

    name = "scripted"

    def __init__(self, replies: Iterable[object] | str | Path, *, model: str = "") -> None:
        source = load_script(replies) if isinstance(replies, (str, Path)) else replies
        self._replies: list[Reply] = entries(source)
        self._next = 0
        self.model = model
        self.calls: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next

    def add(self, *replies: object) -> None:
        """Append replies to the script."""
        self._replies.extend(entries(replies))

    def request(self, req: ModelRequest) -> ModelResponse:
        self.calls.append(req)
        if self._next >= len(self._replies):
            raise ScriptExhausted(
                f"ScriptedProvider ran out of replies: call {len(self.calls)} ({_describe(req)}) "
                f"came after all {len(self._replies)} were used; add a reply for it, or check "
                "why the caller did not stop"
            )
        reply = self._replies[self._next]
        self._next += 1
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ModelResponse):
            return reply
        if "error" in reply:
            raise error_from_entry(reply, self.name)
        return response_from_entry(reply, self.model or req.model)

    def stream(self, req: ModelRequest, on_event: OnEvent) -> ModelResponse:
        """The same reply as :meth:`request`, reported as one event per part."""
        response = self.request(req)
        replay_events(response, on_event)
        return response

    def assert_complete(self) -> None:
        """Fail when replies are left over: the caller stopped earlier than the script says."""
        if self.remaining:
            raise AssertionError(
                f"ScriptedProvider has {self.remaining} unused of {len(self._replies)} replies "
                f"after {len(self.calls)} calls; the caller stopped early, or the script is "
                "longer than the scenario"
            )
