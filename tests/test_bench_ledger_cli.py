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
