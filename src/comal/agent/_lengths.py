"""Length outcomes of a model call, kept apart (OUT-1..3).

- OUTPUT_LENGTH: the response did not finish. It is recorded for the record as an *event*
  (never as a conversation entry: its tool calls would sit open in the history) and none of its
  calls run (OUT-2). The next request at the same point carries a larger output reserve over
  the very same input — nothing is compacted for it (OUT-3). A second OUTPUT_LENGTH at that
  point is the coded error: the same request is never sent again in a loop.
- CONTEXT_LENGTH: the provider rejected the input (or filled its window while generating). The
  window is recalibrated once — shrunk by the overshoot ratio (its limit over its count) when
  its error gives both numbers, else by a fixed fifth — and the reason is recorded; a second
  rejection at the same point is the coded error.

Output escalation (MEM-3) is the other way round: right after a compaction there is room, so
the first request after one may ask for more output than the reserve (:func:`escalated_reserve`).

Both streaks are read back from the ledger's events for the current point of the session
(``at_seq``, the seq the next entry will take), so a crash between two attempts neither resets
nor repeats them. The calibration (``scale``) stays in force for the session's later turns.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ..errors import ComalError
from ..ledger import Record
from ..messages import message_to_dict
from ..providers import OUTPUT_LENGTH, ModelResponse, ProviderError
from ..tokens import Budget

__all__ = [
    "CONTEXT_EVENT",
    "INCOMPLETE_EVENT",
    "SHRINK_UNKNOWN",
    "escalated_reserve",
    "grown_reserve",
    "incomplete_body",
    "recalibrate",
    "reported_overshoot",
    "session_scale",
]

INCOMPLETE_EVENT = "incomplete_response"
CONTEXT_EVENT = "context_length"
# Without numbers in the provider's error, the window shrinks by a fifth: enough to absorb a
# typical estimator error on tool output, small enough not to throw away most of the history.
SHRINK_UNKNOWN = 0.8
# After a measured overshoot, aim a little below the corrected size.
_HEADROOM = 0.95

_ANTHROPIC_TOO_LONG = re.compile(r"([\d,]+)\s+tokens\s*>\s*([\d,]+)")
_OPENAI_TOO_LONG = re.compile(
    r"maximum context length is ([\d,]+) tokens.*?(?:resulted in|requested) ([\d,]+) tokens",
    re.IGNORECASE | re.DOTALL,
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def reported_overshoot(exc: ComalError | None) -> tuple[int, int] | None:
    """``(tokens the provider counted, its limit)`` when the error says so."""
    if exc is None:
        return None
    text = str(exc)
    if (m := _ANTHROPIC_TOO_LONG.search(text)) is not None:
        return _int(m.group(1)), _int(m.group(2))
    if (m := _OPENAI_TOO_LONG.search(text)) is not None:
        return _int(m.group(2)), _int(m.group(1))
    body = exc.body if isinstance(exc, ProviderError) else None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):  # llama.cpp: n_prompt_tokens / n_ctx
        n_prompt, n_ctx = err.get("n_prompt_tokens"), err.get("n_ctx")
        if isinstance(n_prompt, int) and isinstance(n_ctx, int):
            return n_prompt, n_ctx
    return None


def recalibrate(
    budget: Budget, base_window: int, estimate: int, exc: ComalError | None
) -> dict[str, Any]:
    """The event body of one recalibration: the window the next assembly budgets for."""
    reported = reported_overshoot(exc)
    if reported is not None and reported[0] > reported[1] > 0:
        actual, limit = reported
        # The overshoot ratio: the prompt was actual/limit too large in the provider's own
        # count, whatever our estimate said, so the window shrinks by that much (and never
        # stays above the provider's limit).
        window = math.floor(min(budget.window, limit) * (limit / actual) * _HEADROOM)
        why = (
            f"the provider counted {actual:,} input tokens against its limit of {limit:,} "
            f"(~{estimate:,} were estimated); the window shrinks by the overshoot, to {window:,}"
        )
    else:
        window = math.floor(budget.window * SHRINK_UNKNOWN)
        why = (
            f"the provider rejected ~{estimate:,} estimated input tokens without saying how "
            f"many it counted; the window shrinks by {1 - SHRINK_UNKNOWN:.0%} to {window:,}"
        )
    window = max(1, window)
    return {
        "window": budget.window,
        "next_window": window,
        "scale": window / base_window,
        "estimate": estimate,
        "reported": None if reported is None else {"input": reported[0], "limit": reported[1]},
        "reason": why,
        "error": str(exc) if exc is not None else "the response stopped with CONTEXT_LENGTH",
    }


def session_scale(events: Sequence[Record], model: str) -> float:
    """The window scale in force: the latest recalibration for ``model``, else 1."""
    for record in reversed(events):
        if record.kind == CONTEXT_EVENT and record.body.get("model") == model:
            scale = record.body.get("scale")
            if isinstance(scale, int | float) and 0 < scale <= 1:
                return float(scale)
    return 1.0


def grown_reserve(
    previous: int, budget: Budget, input_tokens: int, max_output: int | None
) -> int | None:
    """A larger output reserve over the same input, or ``None`` when none fits: double the
    previous one, within the model's output limit and the room the window leaves."""
    room = budget.window - input_tokens - budget.margin
    grown = min(previous * 2, room)
    if max_output is not None:
        grown = min(grown, max_output)
    return grown if grown > previous else None


def escalated_reserve(
    reserve: int, budget: Budget, input_tokens: int, max_output: int | None, ceiling: int
) -> int:
    """MEM-3: the output the first request after a compaction may ask for — up to
    ``ceiling``, within the room the window leaves over its input and the model's output
    limit, never less than ``reserve``. A compaction has just made room: a reply that needs
    more than the everyday reserve gets it now rather than stopping at OUTPUT_LENGTH."""
    raised = min(ceiling, budget.window - input_tokens - budget.margin)
    if max_output is not None:
        raised = min(raised, max_output)
    return max(reserve, raised)


def incomplete_body(response: ModelResponse, at_seq: int, max_output: int) -> dict[str, Any]:
    """What is kept of an unfinished response: everything (its exact parts, partial calls
    included), as a record, not as history."""
    return {
        "v": 1,
        "at_seq": at_seq,
        "stop": response.stop,
        "raw_stop": response.raw_stop,
        "model": response.model,
        "max_output_tokens": max_output,
        "discarded_calls": [{"id": c.id, "name": c.name} for c in response.message.tool_calls],
        "message": message_to_dict(response.message),
        "usage": response.usage.to_dict(),
        "request_id": response.request_id,
        "note": (
            "not part of the conversation: the response did not finish, so none of its tool "
            "calls ran (OUT-2)"
            if response.stop == OUTPUT_LENGTH
            else "not part of the conversation: the response did not finish"
        ),
    }
