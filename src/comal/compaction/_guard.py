"""Spend caps and the circuit breaker of a summarizer that calls a model (DAG-9).

Both live in the ledger, per tenant, so they hold across processes and restarts: spend is a
row per call (rolling hour and day are sums since ``now − 1 h`` and ``now − 24 h``), and the
breaker is one row (consecutive failures, when it opened, when a half-open trial started).

The breaker: closed until ``breaker_failure_threshold`` consecutive failures; then open for
``breaker_reset_ms``, when the summarizer is not called at all; then half-open: one trial call
may go (another caller waits while the trial is younger than ``breaker_half_open_ms``); the
trial's success closes it, its failure opens it again. Over a cap or with the breaker open the
job degrades to the count-only note; ``comal context`` shows which and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..context import SummaryRequest, SummaryText
from ..context.dag import DagConfig
from ..ledger import LedgerBackend, Scope

__all__ = ["Guard", "GuardState", "guard_state"]

HOUR = 3_600.0
DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class GuardState:
    """What ``comal context`` shows: spend in the windows, the caps, the breaker."""

    spent_hour: int
    spent_day: int
    cap_hour: int
    cap_day: int
    breaker: str  # closed | open | half-open
    failures: int
    blocked: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "spent_hour": self.spent_hour,
            "spent_day": self.spent_day,
            "cap_hour": self.cap_hour,
            "cap_day": self.cap_day,
            "breaker": self.breaker,
            "failures": self.failures,
            "blocked": self.blocked,
        }


class Guard:
    """The caps and breaker of one tenant, read and written through the ledger."""

    def __init__(
        self,
        ledger: LedgerBackend,
        scope: Scope,
        config: DagConfig,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.scope = scope
        self.config = config
        self.clock = clock

    def _breaker(self, now: float) -> tuple[str, int]:
        row = self.ledger.breaker(self.scope.tenant)
        if row is None or row.opened_at is None:
            return "closed", row.failures if row is not None else 0
        if now - row.opened_at < self.config.breaker_reset_ms / 1000:
            return "open", row.failures
        if (
            row.trial_at is not None
            and now - row.trial_at < self.config.breaker_half_open_ms / 1000
        ):
            return "half-open (trial running)", row.failures
        return "half-open", row.failures

    def state(self) -> GuardState:
        now = self.clock()
        breaker, failures = self._breaker(now)
        hour = self.ledger.summarizer_spend(self.scope.tenant, since=now - HOUR)
        day = self.ledger.summarizer_spend(self.scope.tenant, since=now - DAY)
        return GuardState(
            hour,
            day,
            self.config.spend_max_tokens_per_hour,
            self.config.spend_max_tokens_per_day,
            breaker,
            failures,
            self._why(breaker, hour, day),
        )

    def _why(self, breaker: str, hour: int, day: int) -> str | None:
        c = self.config
        if breaker.startswith("open") or "trial running" in breaker:
            return f"summarizer breaker {breaker}"
        hourly, daily = c.spend_max_tokens_per_hour, c.spend_max_tokens_per_day
        if hourly and hour >= hourly:
            return f"tenant over its hourly summarizer cap ({hour:,} of {hourly:,} tokens)"
        if daily and day >= daily:
            return f"tenant over its daily summarizer cap ({day:,} of {daily:,} tokens)"
        return None

    def blocked(self) -> str | None:
        """Why the summarizer must not be called now, or None (a half-open trial starts)."""
        state = self.state()
        if state.blocked is None and state.breaker == "half-open":
            row = self.ledger.breaker(self.scope.tenant)
            self.ledger.set_breaker(
                self.scope.tenant,
                failures=row.failures if row else 0,
                opened_at=row.opened_at if row else None,
                trial_at=self.clock(),
                now=self.clock(),
            )
        return state.blocked

    def success(self) -> None:
        self.ledger.set_breaker(
            self.scope.tenant, failures=0, opened_at=None, trial_at=None, now=self.clock()
        )

    def failure(self) -> None:
        now = self.clock()
        row = self.ledger.breaker(self.scope.tenant)
        failures = (row.failures if row is not None else 0) + 1
        trial = row is not None and row.opened_at is not None
        opened = now if trial or failures >= self.config.breaker_failure_threshold else None
        self.ledger.set_breaker(
            self.scope.tenant, failures=failures, opened_at=opened, trial_at=None, now=now
        )

    def spent(self, answer: SummaryText, request: SummaryRequest) -> None:
        # Unknown usage is estimated from the texts rather than recorded as zero.
        used = (
            answer.input_tokens if answer.input_tokens is not None else request.source_tokens
        ) + (
            answer.output_tokens
            if answer.output_tokens is not None
            else self.ledger.counter.count(answer.text)
        )
        self.ledger.add_summarizer_spend(self.scope, used, answer.summarizer, now=self.clock())


def guard_state(ledger: LedgerBackend, scope: Scope, config: DagConfig) -> GuardState:
    return Guard(ledger, scope, config).state()
