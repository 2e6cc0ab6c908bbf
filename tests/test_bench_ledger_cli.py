"""``comal bench ledger``'s options are checked before anything is measured (the numbers
themselves are printed for people, never asserted)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from comal.cli import app

runner = CliRunner()


@pytest.mark.parametrize("writers", ["x", "0", "1,,a", "300"])
def test_bad_writer_counts_are_a_coded_error(writers: str) -> None:
    result = runner.invoke(app, ["bench", "ledger", "--entries", "100", "--writers", writers])
    assert result.exit_code == 2
    assert "--writers" in result.output


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("context", "--entries"),
        ("turn", "--at"),
        ("proxy", "--concurrency"),
    ],
)
@pytest.mark.parametrize("value", ["abc", "0", "5,x"])
def test_every_bench_list_option_refuses_what_is_not_a_number(
    command: str, option: str, value: str
) -> None:
    # covers: CFG-1
    # These parsed their lists with a bare int(): a word was a ValueError traceback.
    result = runner.invoke(app, ["bench", command, option, value])
    assert result.exit_code == 2, result.output
    assert option in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
