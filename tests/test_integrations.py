"""What every framework adapter shares: lazy imports, a coded error for a missing extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import comal.integrations
from comal.agent import load_config
from comal.errors import ComalError
from comal.integrations import IntegrationUnavailable, LedgerSession
from comal.integrations._core import require
from comal.ledger import LedgerBackend
from comal.ops import receipts

FRAMEWORKS = ("langchain", "langgraph", "pydantic_ai", "agents")


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout


def test_importing_comal_pays_for_no_framework() -> None:
    code = (
        "import sys, comal, comal.integrations\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r}))"
    )
    assert _run(code).strip() == "[]"


def test_a_missing_framework_is_a_coded_error_naming_the_extra() -> None:
    with pytest.raises(IntegrationUnavailable) as caught:
        require("comal_no_such_framework", "langchain")
    assert caught.value.code == "INTEGRATION_UNAVAILABLE"
    assert "pip install 'comal[langchain]'" in str(caught.value)
    # The adapter module itself says so when its framework is absent.
    code = (
        "import sys\n"
        "sys.modules['langchain.agents'] = None\n"
        "from comal.integrations import IntegrationUnavailable\n"
        "try:\n"
        "    from comal.integrations import ComalMiddleware\n"
        "except IntegrationUnavailable as exc:\n"
        "    print(exc.code)\n"
    )
    assert _run(code).strip() == "INTEGRATION_UNAVAILABLE"


def test_exports_are_pinned() -> None:
    assert sorted(comal.integrations.__all__) == sorted(
        [
            "BRANCH_EVENT", "KEYS_EVENT", "Assembled", "ComalHistory", "ComalMiddleware",
            "ComalSession", "IntegrationInput", "IntegrationUnavailable", "LedgerSession",
            "RecallTool",
        ]
    )  # fmt: skip


def test_a_bad_engine_or_setting_is_coded_and_creates_no_session(ledger: LedgerBackend) -> None:
    for options in ({"engine": "nope"}, {"settings": {"keep_recent_results": 0}}):
        with pytest.raises(ComalError) as caught:
            LedgerSession(ledger, **options)
        assert caught.value.code
    assert ledger.sessions() == []


def test_recall_calls_are_judged_under_the_operators_configuration(
    ledger: LedgerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: INT-1, OPS-2
    # The operator denies memory_search; an adapter's recall call must be refused like the
    # agent's and the proxy's (it was judged under a bare default policy before).
    config = tmp_path / "comal.yaml"
    config.write_text("deny: [memory_search]\n")
    monkeypatch.setenv("COMAL_CONFIG", str(config))
    for given in (None, load_config(config)):
        session = LedgerSession(ledger, engine="limit", config=given)
        text, is_error = session.recall("memory_search", '{"query": "deploy token"}', "c1")
        assert is_error and "denied" in text and "memory_search" in text
        (receipt,) = receipts(ledger, session.scope)
        assert receipt.status == "denied" and receipt.judgment["rule"] == "memory_search"
