"""Spend caps and the circuit breaker of a summarizer that calls a model (DAG-9).

Both live in the ledger, per tenant, so they hold across processes and restarts: spend is a
row per call (rolling hour and day are sums since ``now − 1 h`` and ``now − 24 h``), and the
breaker is one row (consecutive failures, when it opened, when a half-open trial started).

The breaker: closed until ``breaker_failure_threshold`` consecutive failures; then open for
``breaker_reset_ms``, when the summarizer is not called at all; then half-open: one trial call
may go (another caller waits while the trial is younger than ``breaker_half_open_ms``); the
trial's success closes it, its failure opens it again.

Per session (ENG-3): a cap on its own summarizer spend (``spend_max_tokens_per_session``), and
a backoff after each failure in a row (``backoff_base_s``, doubled each time, at most
``backoff_max_s``; a success ends it), kept as ``dag_summarizer_backoff`` events of the
session, so one session whose summarizer keeps failing neither spends the tenant's cap nor
calls the model every turn. Over a cap, with the breaker open or the session backing off, the
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
BACKOFF = "dag_summarizer_backoff"


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
    spent_session: int = 0
    cap_session: int = 0
    backoff_until: float | None = None  # the session waits until then (epoch seconds)

    def as_dict(self) -> dict[str, Any]:
        return {
            "spent_hour": self.spent_hour,
            "spent_day": self.spent_day,
            "cap_hour": self.cap_hour,
            "cap_day": self.cap_day,
            "breaker": self.breaker,
            "failures": self.failures,
            "blocked": self.blocked,
            "spent_session": self.spent_session,
            "cap_session": self.cap_session,
            "backoff_until": self.backoff_until,
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

    def _backoff(self) -> tuple[int, float | None]:
        """The session's failures in a row and when its backoff ends (None: no backoff)."""
        found = self.ledger.records(self.scope, "event", kinds=(BACKOFF,))
        if not found:
            return 0, None
        body = found[-1].body
        failures = int(body.get("failures", 0))
        until = body.get("until")
        return failures, float(until) if failures and isinstance(until, int | float) else None

    def state(self) -> GuardState:
        now = self.clock()
        breaker, failures = self._breaker(now)
        tenant = self.scope.tenant
        hour = self.ledger.summarizer_spend(tenant, since=now - HOUR)
        day = self.ledger.summarizer_spend(tenant, since=now - DAY)
        mine = self.ledger.summarizer_spend(tenant, since=0.0, session=self.scope.session)
        streak, until = self._backoff()
        why = self._why(breaker, hour, day) or self._session_why(mine, streak, until, now)
        return GuardState(
            hour,
            day,
            self.config.spend_max_tokens_per_hour,
            self.config.spend_max_tokens_per_day,
            breaker,
            failures,
            why,
            mine,
            self.config.spend_max_tokens_per_session,
            until if until is not None and until > now else None,
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

    def _session_why(self, spent: int, streak: int, until: float | None, now: float) -> str | None:
        cap = self.config.spend_max_tokens_per_session
        if cap and spent >= cap:
            return f"session over its summarizer cap ({spent:,} of {cap:,} tokens)"
        if until is not None and now < until:
            return (
                f"session backing off after {streak} summarizer failure(s) in a row "
                f"({until - now:,.0f} s left)"
            )
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
        if self._backoff()[0]:
            body = {"v": 1, "failures": 0, "until": self.clock()}
            self.ledger.add_record(self.scope, "event", BACKOFF, body)

    def backoff(self) -> None:
        """A job's summarizer failed, or wrote nothing that may be stored: the session waits
        before calling it again (once per job, however many levels it tried)."""
        base = self.config.backoff_base_s
        if not base:
            return
        streak = self._backoff()[0] + 1
        wait = min(self.config.backoff_max_s, base * 2 ** (streak - 1))
        body = {"v": 1, "failures": streak, "until": self.clock() + wait}
        self.ledger.add_record(self.scope, "event", BACKOFF, body)

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
