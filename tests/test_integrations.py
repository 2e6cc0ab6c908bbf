"""What every framework adapter shares: lazy imports, a coded error for a missing extra."""

from __future__ import annotations

import subprocess
import sys

import pytest

import comal.integrations
from comal.errors import ComalError
from comal.integrations import IntegrationUnavailable, LedgerSession
from comal.integrations._core import require
from comal.ledger import LedgerBackend

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
