"""Prompt-cache pricing per provider and model, as data (CCH-2).

The built-in tables are ``prices.json`` beside this module: list prices of input tokens, their
cache-read rate and, where the provider charges a premium for writing the cache, the write rate
for the default (5-minute) and the 1-hour lifetime. ``COMAL_PRICES_FILE`` names a file in the
same format whose entries add models or replace built-ins by name.

:func:`saved_vs_uncached` prices one request's *measured* usage twice — as billed with the cache
(reads at the read rate, writes at the write rate) and as it would have been billed without
(every prompt token at the base input rate) — and returns the difference in dollars. It is
positive when read discounts exceed write premiums, negative on a cold first turn that only
wrote the cache (Anthropic), and ``None`` when the price or a count it needs is unknown: an
unknown is never reported as a saving of 0.

:func:`prompt_cost` prices measured usage at list prices, and :func:`session_cost` a session's
usage per model with it: every surface that shows a cost (the dashboard, the HTTP API, the
TUI's ``/cost``) calls these two, with :func:`price_for` finding the table. A model with no
price makes the cost unknown (``None``, shown as such), never a guess at another model's rates.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InputError
from ._models import _candidates
from ._usage import Usage

__all__ = [
    "PRICES_FILE_ENV",
    "ModelCost",
    "PriceTable",
    "SessionCost",
    "load_price_catalog",
    "load_prices",
    "price_for",
    "prompt_cost",
    "recorded_saving",
    "saved_vs_uncached",
    "session_cost",
]

PRICES_FILE_ENV = "COMAL_PRICES_FILE"
_TTLS = (None, "5m", "1h")


def _rate(value: Any, where: str, path: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InputError("a price must be a non-negative number", path=path, field=where)
    return float(value)


@dataclass(frozen=True, slots=True)
class PriceTable:
    """List prices of one model's prompt tokens, in dollars per ``per_tokens`` tokens.

    ``cache_write`` is ``None`` where the provider charges no write premium (written tokens are
    billed at ``input``); ``cache_write_1h`` is the write rate of the 1-hour cache lifetime
    (``None``: the same as ``cache_write``). ``long_*`` rates replace the others for a request
    above ``long_above`` prompt tokens.
    """

    provider: str
    model: str
    input: float
    cache_read: float
    cache_write: float | None
    cache_write_1h: float | None = None
    per_tokens: int = 1_000_000
    long_above: int | None = None
    long_input: float | None = None
    long_cache_read: float | None = None
    long_cache_write: float | None = None
    long_cache_write_1h: float | None = None
    aliases: tuple[str, ...] = ()
    reference: bool = False
    source: str = ""

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, path: str = "prices.json", per_tokens: int = 1_000_000
    ) -> PriceTable:
        where = str(data.get("model", "?"))
        for key in ("provider", "model"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise InputError(f"every price entry needs a {key}", path=path, field=key)
        long = data.get("long_context") or {}
        if not isinstance(long, Mapping):
            raise InputError("long_context must be an object", path=path, field=where)

        def rate(key: str, src: Mapping[str, Any] = data, optional: bool = False) -> float | None:
            return _rate(src.get(key), f"{where}.{key}", path, optional=optional)

        above = long.get("above")
        if above is not None and (isinstance(above, bool) or not isinstance(above, int)):
            raise InputError("long_context.above must be a whole number", path=path, field=where)
        aliases = data.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise InputError("aliases must be a list of strings", path=path, field=where)
        base, read = rate("input"), rate("cache_read")
        assert base is not None and read is not None
        return cls(
            provider=data["provider"],
            model=data["model"],
            input=base,
            cache_read=read,
            cache_write=rate("cache_write", optional=True),
            cache_write_1h=rate("cache_write_1h", optional=True),
            per_tokens=int(data.get("per_tokens", per_tokens)),
            long_above=above,
            long_input=rate("input", long, True),
            long_cache_read=rate("cache_read", long, True),
            long_cache_write=rate("cache_write", long, True),
            long_cache_write_1h=rate("cache_write_1h", long, True),
            aliases=tuple(aliases),
            reference=bool(data.get("reference", False)),
            source=str(data.get("source", "")),
        )

    def rates(self, total: int, ttl: str | None = None) -> tuple[float, float, float]:
        """(input, cache read, cache write) rates for a request of ``total`` prompt tokens whose
        cache writes live ``ttl`` (``"1h"`` or the default)."""
        if ttl not in _TTLS:
            raise ValueError(f"unknown cache ttl {ttl!r}; use '5m' or '1h'")
        long = self.long_above is not None and total > self.long_above and self.long_input
        if long:
            base = self.long_input or self.input
            read = self.long_cache_read if self.long_cache_read is not None else self.cache_read
            write, write_1h = self.long_cache_write, self.long_cache_write_1h
        else:
            base, read = self.input, self.cache_read
            write, write_1h = self.cache_write, self.cache_write_1h
        if ttl == "1h" and write_1h is not None:
            write = write_1h
        return base, read, write if write is not None else base

    def cost(self, cached: int, total: int) -> float:
        """Dollars for one request of ``total`` prompt tokens of which ``cached`` were read and
        the rest written (the benchmarks' model: every request ends in a breakpoint)."""
        if not 0 <= cached <= total:
            raise ValueError(f"cached tokens {cached} outside 0..{total}")
        _, read, write = self.rates(total)
        return (cached * read + (total - cached) * write) / self.per_tokens

    def uncached(self, total: int) -> float:
        """Dollars for the same request with no prompt caching at all (base input rate)."""
        return total * self.rates(total)[0] / self.per_tokens


def _parse(doc: Any, path: str) -> list[PriceTable]:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("prices"), list):
        raise InputError("a price file is an object with a 'prices' list", path=path)
    per = doc.get("per_tokens", 1_000_000)
    if isinstance(per, bool) or not isinstance(per, int) or per <= 0:
        raise InputError("per_tokens must be a positive whole number", path=path)
    return [PriceTable.from_dict(entry, path=path, per_tokens=per) for entry in doc["prices"]]


@functools.lru_cache(maxsize=1)
def _builtin() -> tuple[PriceTable, ...]:
    text = resources.files(__package__).joinpath("prices.json").read_text(encoding="utf-8")
    return tuple(_parse(json.loads(text), "comal/tokens/prices.json"))


@functools.lru_cache(maxsize=8)
def _user(path: str, mtime_ns: int, size: int) -> tuple[PriceTable, ...]:
    # mtime and size are part of the cache key so an edited file is read again.
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno) from exc
    except OSError as exc:
        raise InputError(f"cannot read the price file: {exc.strerror or exc}", path=path) from exc
    return tuple(_parse(doc, path))


def load_price_catalog(env: Mapping[str, str] | None = None) -> dict[str, PriceTable]:
    """Every priced model name (lower case, aliases included) → its table; entries of
    ``COMAL_PRICES_FILE`` win over the built-in ones."""
    env = os.environ if env is None else env
    tables = list(_builtin())
    value = env.get(PRICES_FILE_ENV, "").strip()
    if value:
        path = Path(value).expanduser()
        if not path.is_file():
            raise InputError(
                f"{PRICES_FILE_ENV} points at {path}, which is not a file; fix or unset it",
                field=PRICES_FILE_ENV,
            )
        stat = path.stat()
        tables += _user(str(path), stat.st_mtime_ns, stat.st_size)
    out: dict[str, PriceTable] = {}
    for table in tables:
        for name in (table.model, *table.aliases):
            out[name.lower()] = table
    return out


def load_prices() -> dict[str, PriceTable]:
    """The benchmarks' reference table of each provider (``reference: true``), by provider."""
    return {t.provider: t for t in _builtin() if t.reference}


def price_for(model: str | None, *, env: Mapping[str, str] | None = None) -> PriceTable | None:
    """The table of ``model`` (exact, ``provider:model`` or a dated snapshot spelling, as the
    window catalog resolves names); ``None`` when it has no price."""
    if not model:
        return None
    catalog = load_price_catalog(env)
    for candidate in _candidates(model):
        found = catalog.get(candidate)
        if found is not None:
            return found
    return None


def saved_vs_uncached(
    usage: Usage, table: PriceTable | None, *, ttl: str | None = None
) -> float | None:
    """Dollars this request's prompt cost less than it would have without prompt caching.

    ``None`` when the price is unknown, the uncached input or the cache reads are unknown, or
    the provider charges a write premium and the writes are unknown. A provider without a write
    premium (OpenAI, Gemini) does not report writes: they are billed like new input and change
    nothing, so an unknown write count does not make the saving unknown there."""
    if table is None or usage.new_input is None or usage.cache_read is None:
        return None
    written = usage.cache_write
    if written is None:
        if table.cache_write is not None:
            return None
        written = 0
    total = usage.new_input + usage.cache_read + written
    base, read, write = table.rates(total, ttl)
    saved = usage.cache_read * (base - read) - written * (write - base)
    return round(saved / table.per_tokens, 8)


def recorded_saving(
    meta: Mapping[str, Any],
    model: str | None,
    new_input: int | None,
    cache_read: int | None,
    cache_write: int | None,
) -> float | None:
    """The ``savedVsUncached`` of one recorded request: the value its meta stored when it was
    recorded (the agent writes it), else computed from its measured usage and the model's
    prices (imported transcripts). Light on purpose: ``comal sessions`` sums it without the
    agent."""
    if "savedVsUncached" in meta:
        value = meta["savedVsUncached"]
        return float(value) if isinstance(value, (int, float)) else None
    usage = Usage(new_input, cache_read, cache_write, None, None)
    ttl = meta.get("cache_ttl")
    return saved_vs_uncached(usage, price_for(model), ttl=ttl if ttl == "1h" else None)


def prompt_cost(usage: Usage, table: PriceTable | None) -> float | None:
    """Dollars of ``usage``'s prompt at ``table``'s list prices: uncached input at the input
    rate, cache reads at the read rate, writes at the (5-minute) write rate.

    ``None`` when the price or the uncached input is unknown. An unknown cache count is none
    (every protocol puts its whole prompt into the known fields: :attr:`Usage.input_total`).
    Base rates, for one request or a session's sums alike: a long-context rate or a 1-hour
    write needs each request's own size and lifetime, which sums do not carry."""
    if table is None or usage.new_input is None:
        return None
    base, read, write = table.rates(0)
    paid = usage.new_input * base
    paid += (usage.cache_read or 0) * read + (usage.cache_write or 0) * write
    return round(paid / table.per_tokens, 8)


@dataclass(frozen=True, slots=True)
class ModelCost:
    """One model's share of a session: its summed usage, requests and prompt cost (``None``
    with the ``reason`` when it cannot be priced)."""

    model: str | None
    requests: int
    usage: Usage
    usd: float | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SessionCost:
    """A session's prompt cost at list prices: ``usd`` is ``None`` when any model that was
    called has no price or no measured input (``unknown`` says which and why)."""

    models: tuple[ModelCost, ...]

    @property
    def unknown(self) -> tuple[str, ...]:
        return tuple(m.reason for m in self.models if m.reason is not None)

    @property
    def usd(self) -> float | None:
        if not self.models or self.unknown:
            return None
        return round(sum(m.usd or 0.0 for m in self.models), 6)


def session_cost(
    by_model: Iterable[tuple[str | None, str | None, Mapping[str, Any]]],
    *,
    env: Mapping[str, str] | None = None,
) -> SessionCost:
    """Price a session's usage per model — the ``(model, protocol, {"requests", <each Usage
    field>})`` rows of ``LedgerBackend.usage_by_model`` — with :func:`price_for` and
    :func:`prompt_cost`."""
    names = Usage.__dataclass_fields__
    out = []
    for model, _, row in by_model:
        usage = Usage(*(row.get(name) for name in names))
        requests = int(row.get("requests") or 0)
        table = price_for(model, env=env)
        usd = prompt_cost(usage, table)
        reason = None
        if table is None:
            reason = (
                f"{model or 'an unnamed model'} has no list price (add it with {PRICES_FILE_ENV})"
            )
        elif usd is None:
            reason = f"{model} reported no input usage"
        out.append(ModelCost(model, requests, usage, usd, reason))
    return SessionCost(tuple(out))
