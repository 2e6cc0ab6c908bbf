from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from _pg_support import BACKENDS, LedgerStore, open_store
from comal.ledger import LedgerBackend, SQLiteLedger, open_ledger

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"


def corpus_dir() -> Path:
    """The shared corpus; missing is a skip locally but a failure under CI=true."""
    if not CORPUS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"corpus missing at {CORPUS} (CI must run beside ../shared)")
        pytest.skip(f"the shared corpus is not at {CORPUS} (it lives beside the repository)")
    return CORPUS


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No test may touch the real per-user ledger or config.
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("COMAL_LEDGER", str(home / "ledger.db"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))  # logs (MCP servers' stderr)
    # PostgreSQL ledgers are keyed by the operator's secret; SQLite ones by their key file.
    monkeypatch.setenv("COMAL_LEDGER_SECRET", "test-ledger-secret-0123456789abcdef")
    monkeypatch.delenv("COMAL_CONTEXT_WINDOW", raising=False)
    monkeypatch.delenv("COMAL_CONFIG", raising=False)
    # Real provider calls are impossible in tests: no keys, and base URLs that go nowhere.
    # A test that talks to the local fake server passes its own base_url and key.
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_COMPAT_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    for url in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.setenv(url, "http://127.0.0.1:9/unreachable")


@pytest.fixture(autouse=True)
def _no_plugin_outlives_its_test() -> Iterator[None]:
    # A configuration naming plugins (``plugins: [comal.chrome]``) enables them in the process,
    # as a command does once; a test must not leave them to the next test's catalog.
    yield
    from comal.plugins import _manager

    current = _manager._current
    if current is not None and any(info.source == "config" for info in current.infos):
        _manager.reset_plugins()


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[SQLiteLedger]:
    led = open_ledger(tmp_path / "ledger.db")
    yield led
    led.close()


@pytest.fixture(params=BACKENDS)
def ledger_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    """Each backend in turn (LED-4: same interface, same tests); PostgreSQL in a fresh schema."""
    with open_store(request.param, tmp_path) as store:
        yield store


@pytest.fixture
def any_ledger(ledger_store: LedgerStore) -> Iterator[LedgerBackend]:
    led = ledger_store.open()
    yield led
    led.close()
