"""Benchmarks: run by hand (``comal bench ...``), print numbers, never asserted by tests.

``comal bench compare`` (:func:`run_compare`) replays agent transcripts through comal's engine
and through its peers (:class:`Strategy` implementations) and reports tokens sent, simulated cost
with prompt caching, pair integrity, retention of tool outputs and assembly speed; see
docs/bench.md.
"""

from ._compare import CompareReport, RunResult, TurnStat, run_compare, run_strategy
from ._context import ContextBench, run_context_bench
from ._corpus import find_transcripts, load_sessions
from ._cost import PROVIDERS, CostMeter, Pricer, PriceTable, cached_prefix, load_prices, wire_groups
from ._integrity import PairCheck, PairLedger
from ._ledger import LedgerBench, run_ledger_bench, synthetic_steps
from ._ledger_scale import SizeRow, WriterRow, run_size_bench, run_writer_bench
from ._report import LONG_CALLS, long_runs, markdown_report, totals, write_report
from ._retention import Fate, classify_retention, read_back, retention_counts
from ._strategies import (
    ComalEngine,
    Full,
    ObservationMasking,
    Sent,
    Session,
    Strategy,
    default_strategies,
    make_strategy,
)
from ._turn import TurnBench, run_turn_bench

__all__ = [
    "LONG_CALLS",
    "PROVIDERS",
    "ComalEngine",
    "CompareReport",
    "ContextBench",
    "CostMeter",
    "Fate",
    "Full",
    "LedgerBench",
    "ObservationMasking",
    "PairCheck",
    "PairLedger",
    "PriceTable",
    "Pricer",
    "RunResult",
    "Sent",
    "Session",
    "SizeRow",
    "Strategy",
    "TurnBench",
    "TurnStat",
    "WriterRow",
    "cached_prefix",
    "classify_retention",
    "default_strategies",
    "find_transcripts",
    "load_prices",
    "load_sessions",
    "long_runs",
    "make_strategy",
    "markdown_report",
    "read_back",
    "retention_counts",
    "run_compare",
    "run_context_bench",
    "run_ledger_bench",
    "run_size_bench",
    "run_strategy",
    "run_turn_bench",
    "run_writer_bench",
    "synthetic_steps",
    "totals",
    "wire_groups",
    "write_report",
]
