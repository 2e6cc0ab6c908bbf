"""Benchmarks: run by hand (``comal bench ...``), print numbers, never asserted by tests."""

from ._ledger import LedgerBench, run_ledger_bench, synthetic_steps

__all__ = ["LedgerBench", "run_ledger_bench", "synthetic_steps"]
