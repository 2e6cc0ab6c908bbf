"""A configuration the operator names (COMAL_CONFIG, --config, --file) must exist: a typo is a
coded CONFIG_NOT_FOUND on every command, never a silent run with defaults (that would drop the
deny rules it was meant to load). Only the per-user default file may be absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from comal.agent import config_path, explain_config, load_config
from comal.cli import main
from comal.errors import InputError

# covers: CFG-1

MISSING = "/nope/comal-config.yaml"


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    captured = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 1), captured.out + captured.err


def test_the_library_refuses_a_named_file_that_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMAL_CONFIG", MISSING)
    for read in (load_config, config_path, lambda: explain_config()):
        with pytest.raises(InputError) as caught:
            read()
        assert caught.value.code == "CONFIG_NOT_FOUND" and caught.value.path == MISSING
        assert "COMAL_CONFIG" in str(caught.value)
    with pytest.raises(InputError) as given:
        load_config(Path(MISSING), env={})
    assert given.value.code == "CONFIG_NOT_FOUND"


def test_the_per_user_default_may_be_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMAL_CONFIG", raising=False)
    assert not config_path().exists()
    assert load_config().mode == "ask"


@pytest.mark.parametrize(
    "args",
    [
        ["-p", "hello", "--model", "openai:gpt-4o"],
        ["sessions"],
        ["tools"],
        ["plugins"],
        ["config", "show"],
        ["config", "path"],
        ["compact", "nope"],
        ["replay", "nope"],
        ["serve", "--port", "0"],
    ],
)
def test_every_command_refuses_a_missing_comal_config(
    args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("COMAL_CONFIG", MISSING)
    code, text = _main(capsys, "--ledger", str(tmp_path / "l.db"), *args)
    assert code == 2, text
    assert "CONFIG_NOT_FOUND" in text and MISSING in text


def test_named_by_a_flag_is_the_same_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["serve", "--config", MISSING], ["config", "show", "--file", MISSING]):
        code, text = _main(capsys, "--ledger", str(tmp_path / "l.db"), *args)
        assert code == 2 and "CONFIG_NOT_FOUND" in text and MISSING in text, text


def test_doctor_reports_it_as_a_failed_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COMAL_CONFIG", MISSING)
    code, text = _main(capsys, "doctor", "--json")
    assert code == 0
    (check,) = [c for c in json.loads(text) if c["check"] == "configuration"]
    assert check["ok"] is False and "CONFIG_NOT_FOUND" in check["detail"]
    assert "absent: defaults" not in check["detail"]
