"""The three-tier spend guard (TOK-6), summed from the ledger before every model call.

A request's tokens are everything it was billed for: new input, cache reads and writes, and
output (which includes reasoning). Unknown counts (``None``, TOK-1) add nothing: a guard cannot
invent spend it was not told about. Three sums are checked against their caps:

- ``execution``: the requests of this run (``meta.run`` equals the run id) — one ``comal -p`` or
  one resume;
- ``hour`` and ``day``: every request the comal runtime made in the tenant's sessions in the last
  hour / 24 hours, dated by the ``at`` the agent writes into each request's meta. Usage imported
  from other harnesses carries no ``at``: it was spent (and capped) elsewhere.

The next request counts too, priced at its estimated input plus its output reserve, so a call
that would cross a cap is refused — before any HTTP request — with a diagnostic naming the tier,
the sum, the cap and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..ledger import LedgerBackend, RequestRecord, Scope
from ._errors import SpendCapExceeded

__all__ = ["Spend", "SpendCaps", "check_spend", "request_tokens", "spent"]


@dataclass(frozen=True, slots=True)
class SpendCaps:
    """Token caps per execution, per hour and per day (operator-only settings, CFG-2)."""

    execution: int = 2_000_000
    hour: int = 10_000_000
    day: int = 100_000_000


@dataclass(frozen=True, slots=True)
class Spend:
    execution: int
    hour: int
    day: int


def request_tokens(r: RequestRecord) -> int:
    return sum(n or 0 for n in (r.new_input, r.cache_read, r.cache_write, r.output))


def _when(r: RequestRecord) -> datetime | None:
    at = r.meta.get("at")
    if not isinstance(at, str):
        return None
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def spent(ledger: LedgerBackend, tenant: str, run: str, *, now: datetime | None = None) -> Spend:
    """Tokens spent by run ``run`` and by the tenant in the last hour and day: three index
    reads of the ledger's running totals, whatever the length of the session or of the
    tenant's history (imported usage carries no time and is in none of them)."""
    now = now or datetime.now(UTC)
    return Spend(
        execution=ledger.spend(tenant, run=run),
        hour=ledger.spend(tenant, since=now - timedelta(hours=1)),
        day=ledger.spend(tenant, since=now - timedelta(days=1)),
    )


def check_spend(
    ledger: LedgerBackend,
    scope: Scope,
    caps: SpendCaps,
    *,
    run: str,
    next_tokens: int,
    now: datetime | None = None,
) -> Spend:
    """Raise :class:`SpendCapExceeded` when the next request (``next_tokens``, estimated)
    would take any tier over its cap; return the sums otherwise."""
    sums = spent(ledger, scope.tenant, run, now=now)
    for tier, total, cap in (
        ("execution", sums.execution, caps.execution),
        ("hour", sums.hour, caps.hour),
        ("day", sums.day, caps.day),
    ):
        if total + next_tokens > cap:
            window = {"execution": "this run", "hour": "the last hour", "day": "the last 24 hours"}
            raise SpendCapExceeded(
                f"SPEND_CAP: the {tier} cap of {cap:,} tokens would be crossed: {total:,} spent "
                f"in {window[tier]} (tenant {scope.tenant!r}) + ~{next_tokens:,} for the next "
                f"request (estimated input + output reserve). No request was sent. Wait for the "
                f"window to pass, or have the operator raise spend.{tier} in the configuration.",
                tier=tier,
                cap=cap,
                spent=total,
                projected=next_tokens,
            )
    return sums
