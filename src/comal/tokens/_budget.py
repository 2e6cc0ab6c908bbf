"""The budget algebra (TOK-4) and the CONTEXT_OVERHEAD check (TOK-5).

A request must fit its window::

    system + tool schemas + history  +  output reserve  +  safety margin  <=  window

so the input may use at most ``input_limit = window - output_reserve - margin`` tokens (less
where the model has a separate input cap). Auto-compaction triggers at ``threshold_ratio``
(90 %) of that input limit: taking 90 % of the raw window instead would put the threshold at
or beyond the hard limit whenever the reserve and margin exceed 10 % of the window, and
compaction would only start after a request had already failed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ..errors import ContextOverhead
from ._models import WindowResolution

__all__ = ["DEFAULT_RESERVE_CAP", "MARGIN_RATIO", "Budget"]

# Output reserve when none is given: the model's max output, but at most 16k tokens and at most
# an eighth of the window. Agent turns rarely write more than a few thousand tokens; reserving a
# 64k-128k max output would take a large share of the window away from history for nothing, and
# a reply that needs more stops with OUTPUT_LENGTH and is continued.
DEFAULT_RESERVE_CAP = 16_384
# Safety margin when none is given: 2 % of the window, covering the estimator's error on the
# unmeasured part of the prompt and provider-side framing we do not see.
MARGIN_RATIO = 0.02


@dataclass(frozen=True, slots=True)
class Budget:
    """Token budget of one request. All counts are tokens; see the module docstring."""

    window: int
    system_tokens: int
    tools_tokens: int
    output_reserve: int
    margin: int
    threshold_ratio: float = 0.9
    max_input: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "threshold_ratio":
                if not 0 < value <= 1:
                    raise ValueError(f"threshold_ratio must be in (0, 1], not {value!r}")
            elif value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"Budget.{f.name} must be an int, not {value!r}")
            elif value is not None and value < 0:
                raise ValueError(f"Budget.{f.name} must be >= 0, not {value}")
        if self.window <= 0:
            raise ValueError(f"Budget.window must be positive, not {self.window}")

    @classmethod
    def for_window(
        cls,
        window: int,
        *,
        system_tokens: int,
        tools_tokens: int,
        output_reserve: int | None = None,
        margin: int | None = None,
        max_output: int | None = None,
        max_input: int | None = None,
        threshold_ratio: float = 0.9,
    ) -> Budget:
        """A budget with default reserve (``min(max_output, 16_384, window // 8)``) and margin
        (``ceil(2 % of window)``) unless given."""
        if output_reserve is None:
            output_reserve = min(DEFAULT_RESERVE_CAP, window // 8)
            if max_output is not None:
                output_reserve = min(output_reserve, max_output)
        if margin is None:
            margin = math.ceil(window * MARGIN_RATIO)
        return cls(
            window=window,
            system_tokens=system_tokens,
            tools_tokens=tools_tokens,
            output_reserve=output_reserve,
            margin=margin,
            threshold_ratio=threshold_ratio,
            max_input=max_input,
        )

    @classmethod
    def for_resolution(
        cls, resolution: WindowResolution, *, system_tokens: int, tools_tokens: int
    ) -> Budget:
        """:meth:`for_window` with the window, max output and input cap of a resolved model."""
        return cls.for_window(
            resolution.window,
            system_tokens=system_tokens,
            tools_tokens=tools_tokens,
            max_output=resolution.max_output,
            max_input=resolution.max_input,
        )

    @property
    def fixed(self) -> int:
        """Instructions and tool schemas: sent with every request, before any conversation."""
        return self.system_tokens + self.tools_tokens

    @property
    def input_limit(self) -> int:
        """The most the whole input (fixed + history) may take."""
        limit = self.window - self.output_reserve - self.margin
        if self.max_input is not None:
            limit = min(limit, self.max_input - self.margin)
        return limit

    @property
    def history_capacity(self) -> int:
        """Room left for the conversation; zero or negative means CONTEXT_OVERHEAD."""
        return self.input_limit - self.fixed

    @property
    def threshold_tokens(self) -> int:
        """Total input at which auto-compaction starts: ``threshold_ratio`` of the input limit."""
        return math.floor(self.threshold_ratio * max(self.input_limit, 0))

    def utilization(self, history_tokens: int) -> float:
        """Share of the input limit used by fixed + history (may exceed 1.0)."""
        used = self.fixed + history_tokens
        if self.input_limit <= 0:
            return math.inf if used > 0 else 0.0
        return used / self.input_limit

    def over_threshold(self, history_tokens: int) -> bool:
        """Whether this much history should trigger compaction before the next request."""
        return self.fixed + history_tokens > self.threshold_tokens

    def fits(self, history_tokens: int) -> bool:
        """Whether a request with this much history respects the window."""
        return history_tokens <= self.history_capacity

    def check_overhead(self) -> None:
        """Raise :class:`~comal.errors.ContextOverhead` when instructions and tool schemas leave
        no room for any conversation (TOK-5); call before sending the first request."""
        if self.history_capacity > 0:
            return
        need = self.fixed + self.output_reserve + self.margin
        cap = ""
        if self.max_input is not None and self.max_input - self.margin < (
            self.window - self.output_reserve - self.margin
        ):
            cap = f" (input cap {self.max_input:,})"
        raise ContextOverhead(
            f"CONTEXT_OVERHEAD: instructions {self.system_tokens:,} + tool schemas "
            f"{self.tools_tokens:,} + output reserve {self.output_reserve:,} + margin "
            f"{self.margin:,} = {need:,} tokens leave no room in the {self.window:,}-token "
            f"window{cap}; no request was sent. Shorten the instructions, offer fewer tools, "
            "or use a model with a larger window."
        )

    def breakdown(self) -> dict[str, int | float | None]:
        """Every term of the algebra, for ``/context`` and error reports."""
        return {
            "window": self.window,
            "max_input": self.max_input,
            "system_tokens": self.system_tokens,
            "tools_tokens": self.tools_tokens,
            "fixed": self.fixed,
            "output_reserve": self.output_reserve,
            "margin": self.margin,
            "input_limit": self.input_limit,
            "history_capacity": self.history_capacity,
            "threshold_ratio": self.threshold_ratio,
            "threshold_tokens": self.threshold_tokens,
        }
