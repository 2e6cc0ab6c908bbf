"""What the host running a call can tell it while it runs, and what the call tells back.

A person stops a run (the TUI's Escape, the web page's ``interrupt``) through a
:class:`StopSignal` the host hands the house with the call (``House.run(stop=...)``); a
handler that can be stopped looks at it while it waits: Bash kills the command's process
group as its timeout does, an MCP call cancels its request (``notifications/cancelled``).
Either keeps what came before, and its result says who stopped it and after how long, with
the receipt's status ``interrupted``; a handler that does not look finishes first (the reads
and writes of the house are short). A call the stop came before is never started: its result
says so (:func:`not_run`), so a model's step never holds a call without an answer.

A running call's output reaches the host as it comes through an :class:`OutputStream`: its
bytes are decoded as they arrive and handed on at most every tenth of a second, and past
:data:`LIVE_CAP` characters per call only a last line saying so: what streams is a view for
a person watching; the call's result holds the output as the house keeps it.
"""

from __future__ import annotations

import codecs
import threading
import time
from collections.abc import Callable

from ..messages import Message, Role, ToolCall, ToolResult, sha256_hex
from ._house import Outcome
from ._judge import Judgment
from ._model import Actor, Decision, Surface
from ._operation import Registry
from ._receipt import Receipt

__all__ = ["LIVE_CAP", "OnOutput", "OutputStream", "StopSignal", "interrupted_note", "not_run"]

# (stream, text): "stdout" or "stderr", and what the call wrote since the last time.
OnOutput = Callable[[str, str], None]
LIVE_CAP = 200_000
_EVERY_S = 0.1
_HELD_CHARS = 16_000
NOT_RUN_RULE = "interrupted"


class StopSignal:
    """A request to stop what runs now, set from any thread; ``by`` says who asked."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.by = "the user"

    def request(self, by: str = "the user") -> None:
        self.by = by
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


def interrupted_note(stop: StopSignal, seconds: float, what: str) -> str:
    """The line a stopped call's result ends with: who stopped it, after how long, and what
    was done to it (``what``)."""
    return f"[interrupted by {stop.by} after {seconds:.1f} s: {what}]"


class OutputStream:
    """One call's output on its way to ``sink``: decoded as it comes (a character split
    between two reads waits for its end), held back and handed on at most every
    :data:`_EVERY_S` seconds or :data:`_HELD_CHARS` characters, and capped at ``cap``
    characters in all. Called from the handler's thread; :meth:`close` hands on the rest."""

    def __init__(self, sink: OnOutput, cap: int = LIVE_CAP) -> None:
        self.sink = sink
        self.cap = cap
        self.sent = 0
        self._decoders: dict[str, codecs.IncrementalDecoder] = {}
        self._held: list[tuple[str, str]] = []
        self._size = 0
        self._since = 0.0
        self._capped = False

    def write(self, stream: str, data: bytes) -> None:
        if self._capped:
            return
        decoder = self._decoders.get(stream)
        if decoder is None:
            decoder = self._decoders[stream] = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(data)
        if not text:
            return
        if not self._held:
            self._since = time.monotonic()
        self._held.append((stream, text))
        self._size += len(text)
        if self._size >= _HELD_CHARS or time.monotonic() - self._since >= _EVERY_S:
            self.flush()

    def tick(self) -> None:
        """Hand on what was held long enough: the handler calls it while it waits, so a line
        followed by silence still reaches the host."""
        if self._held and time.monotonic() - self._since >= _EVERY_S:
            self.flush()

    def flush(self) -> None:
        """Hand on what is held, merged per stream in order, within the cap."""
        held, self._held, self._size = self._held, [], 0
        merged: list[tuple[str, str]] = []
        for stream, text in held:
            if merged and merged[-1][0] == stream:
                merged[-1] = (stream, merged[-1][1] + text)
            else:
                merged.append((stream, text))
        for stream, text in merged:
            room = self.cap - self.sent
            if len(text) > room:
                text = text[:room] + f"\n[… live output stops after {self.cap:,} characters; "
                text += "the result has the output as kept]\n"
                self._capped = True
            self.sent += len(text)
            self._send(stream, text)
            if self._capped:
                return

    def close(self) -> None:
        if not self._capped:
            for stream, decoder in self._decoders.items():
                tail = decoder.decode(b"", final=True)
                if tail:
                    self._held.append((stream, tail))
        self.flush()

    def _send(self, stream: str, text: str) -> None:
        # The host's view must never fail the call: what streams is only a view.
        try:
            self.sink(stream, text)
        except Exception:
            return


def not_run(
    registry: Registry, call: ToolCall, actor: Actor, surface: Surface, why: str
) -> Outcome:
    """What a call the stop came before gets instead of running: a result saying so (an
    error for the model) and a receipt with status ``interrupted`` and disposition
    ``repeat`` (nothing ran), never judged. Write it with ``House.record``."""
    op = registry.get(call.name)
    effects = op.effects if op is not None else ()
    decision = Decision.deny(NOT_RUN_RULE, why)
    judgment = Judgment(call, actor, surface, decision, sha256_hex(call.arguments), op)
    text = f"[not run: {why}]"
    receipt = Receipt(
        operation=call.name,
        call_id=call.id,
        actor=actor,
        surface=surface,
        arguments_digest=judgment.arguments_digest,
        judgment={"decision": None, "rule": NOT_RUN_RULE, "reason": why},
        status="interrupted",
        disposition="repeat",
        effects=effects,
        observations={"started": False, "reason": why},
    )
    result = ToolResult(call.id, text, is_error=True, name=call.name)
    return Outcome(judgment, Message(Role.TOOL, (result,)), receipt)
