"""Benchmarks: run by hand (``comal bench ...``), print numbers, never asserted by tests."""

from ._context import ContextBench, run_context_bench
from ._ledger import LedgerBench, run_ledger_bench, synthetic_steps

__all__ = [
    "ContextBench",
    "LedgerBench",
    "run_context_bench",
    "run_ledger_bench",
    "synthetic_steps",
]
