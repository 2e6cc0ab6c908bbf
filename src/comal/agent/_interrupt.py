"""Stopping a running loop, the same way on every surface that holds one (DRV-2).

A person asks (the TUI's Escape, the web page's ``interrupt`` operation) and the run stops
now, not at the end of what it is doing:

- a tool call running then is stopped by its handler (:class:`~comal.ops.StopSignal`): Bash
  kills the command's process group as its timeout does, an MCP call cancels its request; its
  result keeps the output so far and says who stopped it after how long, its receipt says
  ``interrupted``;
- a model call in flight is abandoned (:func:`stoppable_call`): nothing of its reply is
  stored, and its request is recorded with its usage unknown (it may have cost tokens);
- otherwise the loop stops at its next safe phase: before a model call (``assembled``), after
  a call's receipt (``recorded``), after the prompt is stored (``intended``).

The calls of the step that had not started get a result saying they never ran (receipt
``interrupted``, disposition ``repeat``), and the session gets a message from comal saying the
person interrupted the run: the next model call sees both, whatever starts it (a prompt, a
resume). Messages the person sent while it worked and that are still queued go in then, and the
run goes on with them (:mod:`._queue`); without any, the run ends.
"""

from __future__ import annotations

import threading

from ..errors import UserError
from ..messages import Message, Role, Text
from ..ops import StopSignal
from ..providers import ModelRequest, ModelResponse, OnEvent, Provider, StreamEvent, call_model
from ._propose_outcomes import Probe

__all__ = [
    "INTERRUPTED_EVENT",
    "STOPPABLE",
    "Interrupted",
    "Interrupter",
    "interrupted_message",
    "stoppable_call",
]

STOPPABLE = frozenset({"assembled", "recorded", "intended"})
INTERRUPTED_EVENT = "interrupted"
# How often a waiting model call looks at the stop.
_LOOK_S = 0.05


class Interrupted(UserError):
    code = "INTERRUPTED"


class Interrupter(StopSignal):
    """One run's stop, read by the loop's probe (:meth:`probe`) and handed to the running
    calls (it is their :class:`~comal.ops.StopSignal`)."""

    def __init__(self, session: str = "", then: Probe | None = None) -> None:
        super().__init__()
        self.session, self.then = session, then

    def probe(self, phase: str, detail: str) -> None:
        if self.then is not None:
            self.then(phase, detail)
        if phase in STOPPABLE and self.is_set():
            raise self.error()

    def error(self) -> Interrupted:
        what = f"session {self.session}" if self.session else "the session"
        return Interrupted(f"{what} was interrupted by {self.by}; send a prompt to continue it")


def interrupted_message(by: str, where: str) -> Message:
    """What the model reads next: the person stopped the run, and where."""
    text = (
        f"[comal] {by[:1].upper()}{by[1:]} interrupted the run {where}. What was running was "
        "stopped (its result says so) and the calls that had not started did not run. Do not "
        "repeat them unasked: wait for the next message."
    )
    return Message(Role.USER, (Text(text),), name="comal")


def stoppable_call(
    provider: Provider, request: ModelRequest, on_event: OnEvent | None, stop: StopSignal
) -> ModelResponse:
    """``call_model`` that a stop abandons at once: the call runs in a thread of its own and
    this one waits on it and on ``stop``; a streamed reply is cut at its next event. Raises
    :class:`Interrupted` when stopped (the call's thread ends by itself, its reply unused)."""
    box: dict[str, object] = {}
    done, abandoned = threading.Event(), threading.Event()

    def events(event: StreamEvent) -> None:
        # Once abandoned, the call stays so even if the stop is cleared (the run went on with
        # a person's message): none of its text reaches the surface.
        if abandoned.is_set() or stop.is_set():
            raise Interrupted("the model call was interrupted")  # cuts the stream
        if on_event is not None:
            on_event(event)

    def run() -> None:
        try:
            # A call that does not stream can only be abandoned (its thread runs it out).
            box["response"] = call_model(provider, request, events if on_event else None)
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=run, name="comal-model-call", daemon=True)
    thread.start()
    while not done.wait(_LOOK_S):
        if stop.is_set():
            abandoned.set()
            raise Interrupted(f"the model call was interrupted by {stop.by}")
    error = box.get("error")
    if isinstance(error, BaseException):
        raise error
    response = box["response"]
    assert isinstance(response, ModelResponse)
    return response
