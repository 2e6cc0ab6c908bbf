"""The top-level API is a promise: adding or removing a name is a deliberate change."""

from __future__ import annotations

import comal


def test_top_level_exports_are_pinned() -> None:
    assert sorted(comal.__all__) == sorted(
        [
            "Assembly", "Budget", "BudgetError", "ComalError", "ContextLength",
            "ContextOverhead", "ContextPressureLoop", "EngineConfig", "Message", "OutputLength",
            "Role", "SQLiteLedger", "Scope", "Text", "ToolCall", "ToolResult", "Usage",
            "UserError", "View", "__version__", "assemble", "default_counter", "open_ledger",
            "read_evidence", "resolve_window", "verify",
        ]
    )  # fmt: skip
    for name in comal.__all__:
        assert getattr(comal, name) is not None


def test_spec_codes_are_stable() -> None:
    assert comal.ContextLength.code == "CONTEXT_LENGTH"
    assert comal.OutputLength.code == "OUTPUT_LENGTH"
    assert comal.ContextOverhead.code == "CONTEXT_OVERHEAD"
    assert comal.ContextPressureLoop.code == "CONTEXT_PRESSURE_LOOP"
