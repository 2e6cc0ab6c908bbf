"""When the dag engine compacts: timed by the prompt cache (ENG-1).

A compaction rewrites the prompt from the new summary on: the provider bills those tokens as
cache writes (Anthropic: 1.25× the input price, 12.5× a cache read), where leaving the history
alone would read them from the cache. What it saves is the tokens it takes out, read on every
later call. So:

- **cold** (more than ``cache_ttl_s`` passed since the previous request: the transcript's own
  times, the entries' ``created_at``): the whole prompt is written anyway, so compacting costs
  nothing extra; a pass is due as soon as the history holds a chunk worth summarizing above
  the target;
- **warm**, over ``context_threshold``: a pass is due when it pays back, that is when the calls
  it takes to save what it rewrites, ``(cache_write_cost − 1) × target / (history − target)``,
  are no more than the calls the session has made so far (its expected remainder); otherwise
  the compaction is **deferred** and the debt recorded (a ``dag_deferred`` event, once per
  frontier);
- **the debt is paid** when the cache goes cold, or at ``hard_threshold`` of the history
  capacity whatever the cache: never an overflow (and past the capacity the assembly evicts,
  DAG-4), in bounded passes (the sweep's limits, the summarizer's backoff).

A pure function of the view: the times are the stored entries', so a replay times its
compactions as the live run did.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ...ledger import Entry
from ...messages import Role
from .._view import View
from ._config import DagConfig

__all__ = ["CacheState", "Timing", "cache_state", "calls_seen", "timing"]

CacheState = Literal["cold", "warm"]
Reason = Literal["forced", "cold", "trigger", "debt", "deferred", "none"]
_MAX_HORIZON = 100


def _seconds(entry: Entry) -> float | None:
    try:
        return datetime.fromisoformat(entry.created_at).timestamp()
    except ValueError:
        return None


def cache_state(view: View, ttl_s: float) -> CacheState:
    """Cold when the newest entry came more than ``ttl_s`` after the previous request's last
    entry (the one before the newest assistant message); warm otherwise, or when unknown."""
    entries = view.entries
    if ttl_s <= 0 or not entries:
        return "warm"
    last = next(
        (i for i in range(len(entries) - 1, 0, -1) if entries[i].role == Role.ASSISTANT.value),
        None,
    )
    if last is None:
        return "warm"
    now, before = _seconds(entries[-1]), _seconds(entries[last - 1])
    if now is None or before is None:
        return "warm"
    return "cold" if now - before > ttl_s else "warm"


def calls_seen(view: View) -> int:
    """Model calls the session has made: those in the view, and those the summaries cover
    (their meta says; an older summary's half of its messages)."""
    mine = sum(1 for e in view.entries if e.role == Role.ASSISTANT.value)
    covered = 0
    for s in view.summaries:
        calls = s.meta.get("calls")
        covered += calls if isinstance(calls, int) else s.descendant_count // 2
    return mine + covered


@dataclass(frozen=True, slots=True)
class Timing:
    """Whether a pass is due now and why; ``pays_back_after`` the calls a warm pass takes to
    save what it rewrites (None where not priced)."""

    due: bool
    reason: Reason
    cache: CacheState
    pays_back_after: float | None = None
    calls: int = 0


def timing(
    view: View,
    config: DagConfig,
    history: int,
    *,
    trigger: int,
    target: int,
    hard: int,
    min_chunk: int,
    force: bool = False,
) -> Timing:
    """See the module docstring."""
    cache = cache_state(view, config.cache_ttl_s)
    calls = calls_seen(view)
    if force:
        return Timing(True, "forced", cache, None, calls)
    if cache == "cold" and history > target + min_chunk:
        return Timing(True, "cold", cache, None, calls)
    if history > hard:
        return Timing(True, "debt", cache, None, calls)
    if history <= trigger:
        return Timing(False, "none", cache, None, calls)
    saved = max(1, history - target)
    after = (config.cache_write_cost - 1) * target / saved
    if after <= min(max(calls, 1), _MAX_HORIZON):
        return Timing(True, "trigger", cache, round(after, 2), calls)
    return Timing(False, "deferred", cache, round(after, 2), calls)
