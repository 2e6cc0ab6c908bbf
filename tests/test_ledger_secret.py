"""The ledger's secret, which keys its seals: where each backend finds it, and what happens
without it — the ledger does not open (its reads could not be checked), and opened leniently to
be reported on it reads with body digests checked, refuses to write, and ``verify`` names the
missing or wrong secret instead of passing."""

from __future__ import annotations

import hmac
import os
import stat
from pathlib import Path

import pytest

from _pg_support import LedgerStore
from comal.errors import UserError
from comal.ledger import (
    LedgerBackend,
    LedgerKeyMismatch,
    LedgerSecretMissing,
    Scope,
    open_ledger,
    verify,
)
from comal.ledger._seal import Sealer
from comal.messages import Message, canonical_json

ENV = "COMAL_LEDGER_SECRET"


def _fill(led: LedgerBackend) -> Scope:
    scope = led.create_session("t", "a")
    led.append(scope, [Message.user("kept")])
    return scope


def _key_files(state: Path) -> list[Path]:
    return sorted((state / "comal" / "ledger-keys").glob("*.key"))


def _move_away(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Another machine: an empty state directory and no secret in the environment."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.delenv(ENV)


def test_a_ledger_without_its_secret_reads_refuses_writes_and_fails_verify(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # covers: LED-6
    with ledger_store.open() as led:
        scope = _fill(led)
    if ledger_store.backend == "sqlite":
        (key_file,) = _key_files(Path(os.environ["XDG_STATE_HOME"]))
        secret = key_file.read_text().strip()
    else:
        secret = os.environ[ENV]
    _move_away(monkeypatch, tmp_path)
    with pytest.raises(LedgerSecretMissing) as refused:
        ledger_store.open()
    assert "not found" in str(refused.value)
    with ledger_store.open(strict=False) as led:
        assert [e.message.text for e in led.entries(scope)] == ["kept"]
        with pytest.raises(LedgerSecretMissing) as err:
            led.append(scope, [Message.user("more")])
        assert err.value.code == "LEDGER_SECRET_MISSING"
        report = verify(led)
    assert not report.ok and report.sealing.startswith("not checked")
    (fault,) = report.faults
    assert (fault.session, fault.table, fault.kind) == (None, "ledger", "secret")
    assert ENV in fault.detail and "not found" in fault.detail
    if ledger_store.backend == "sqlite":  # it names the key file it looked for
        assert f"{key_file.name}" in fault.detail
    # The documented way to check it elsewhere: the secret given in the environment.
    monkeypatch.setenv(ENV, secret)
    with ledger_store.open() as led:
        report = verify(led)
        led.append(scope, [Message.user("more")])
    assert report.ok and ENV in report.sealing


def test_a_wrong_secret_is_named_not_trusted(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # covers: LED-6
    with ledger_store.open() as led:
        _fill(led)
    _move_away(monkeypatch, tmp_path)
    monkeypatch.setenv(ENV, "not-the-ledgers-secret-at-all")
    with pytest.raises(LedgerKeyMismatch) as refused:
        ledger_store.open()
    assert refused.value.code == "LEDGER_KEY_MISMATCH"
    with ledger_store.open(strict=False) as led:
        report = verify(led)
    assert [(f.table, f.kind) for f in report.faults] == [("ledger", "secret")]
    assert "is not the one this ledger was sealed with" in report.faults[0].detail


def test_an_sqlite_key_file_is_private_and_apart_from_the_ledger(tmp_path: Path) -> None:
    # covers: LED-6
    state = Path(os.environ["XDG_STATE_HOME"])
    path = tmp_path / "ledger.db"
    with open_ledger(path) as led:
        _fill(led)
    (key_file,) = _key_files(state)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert key_file.read_bytes().strip() not in path.read_bytes()
    with open_ledger(path, create=False) as led:  # opening again makes no second key
        assert verify(led).ok
    assert _key_files(state) == [key_file]
    # A secret given by the caller keys a new ledger instead of a file.
    given = tmp_path / "given.db"
    with open_ledger(given, secret="a caller's own secret, long enough") as led:
        _fill(led)
    assert _key_files(state) == [key_file]
    with open_ledger(given, secret="a caller's own secret, long enough") as led:
        assert verify(led).ok
    with open_ledger(given, strict=False) as led:
        assert [f.kind for f in verify(led).faults] == ["secret"]
    with pytest.raises(UserError, match="shorter than 16"):
        open_ledger(tmp_path / "short.db", secret="short")


def test_a_postgres_ledger_is_not_made_without_its_secret(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: LED-4, LED-6
    if ledger_store.backend != "postgres":
        pytest.skip("an SQLite ledger makes its own key file")
    monkeypatch.delenv(ENV)
    with pytest.raises(LedgerSecretMissing, match=ENV) as err:
        ledger_store.open()
    assert "openssl rand" in str(err.value)
    monkeypatch.setenv(ENV, "the operators secret, long enough")
    with ledger_store.open() as led:  # nothing half made was left in the way
        _fill(led)
        assert verify(led).ok


@pytest.mark.parametrize("key", [b"k" * 16, bytes(range(64)), b"a long operator secret " * 9])
def test_seals_are_hmac_sha256_of_the_canonical_row(key: bytes) -> None:
    # covers: LED-6
    values = ("session", 3, 3, "tool", 12, 345, "2025-01-01T00:00Z", "c1", "d" * 64, None, "\u00e9")
    text = canonical_json(["entries", *values]).encode()
    assert Sealer(key, "test").seal("entries", values) == hmac.new(key, text, "sha256").hexdigest()
