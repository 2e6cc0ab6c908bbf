"""Every path a command writes (``replay --dump/--plot``, ``bench compare --out``) fails as a
coded OUTPUT_PATH error naming the option and the path, before any work, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from comal.cli import app
from conftest import corpus_dir

# covers: CFG-1

runner = CliRunner()


def _small() -> Path:
    return corpus_dir() / "swe-agent" / "function_calling_simple.traj"


def _refusal(args: list[str]) -> dict[str, str]:
    """The coded error a command printed (``--json``), after checking it exited 2 cleanly."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, result.output
    error: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])["error"]
    return error


def _names(error: dict[str, str], option: str, path: str) -> bool:
    message = error["message"]
    return error["code"] == "OUTPUT_PATH" and option in message and path in message


def _cases(tmp_path: Path) -> list[tuple[str, str]]:
    afile = tmp_path / "afile"
    afile.write_text("not a folder\n")
    return [
        ("/proc/comal-x.png", "under /proc nothing can be created"),
        (str(afile / "d"), "a file stands where a folder must be"),
    ]


@pytest.mark.parametrize("option", ["--plot", "--dump"])
def test_replay_outputs_that_cannot_be_written_are_coded_errors(
    tmp_path: Path, option: str
) -> None:
    db = tmp_path / "r.db"
    for path, _why in _cases(tmp_path):
        target = path if option == "--plot" else path.removesuffix(".png")
        args = ["--ledger", str(db), "replay", str(_small()), option, target]
        assert _names(_refusal(args), option, target)


def test_a_dump_folder_that_is_a_file_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    args = ["--ledger", str(tmp_path / "r.db"), "replay", str(_small()), "--dump", str(afile)]
    assert _names(_refusal(args), "--dump", str(afile))


def test_bench_compare_out_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path,
) -> None:
    for path, _why in _cases(tmp_path):
        target = path.removesuffix(".png")
        args = ["bench", "compare", str(_small()), "--windows", "32000", "--out", target]
        assert _names(_refusal(args), "--out", target)


def test_the_writable_paths_still_work(tmp_path: Path) -> None:
    db, plot, dump = tmp_path / "r.db", tmp_path / "new" / "p.png", tmp_path / "a" / "b"
    args = ["--ledger", str(db), "replay", str(_small()), "--plot", str(plot), "--dump", str(dump)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert plot.read_bytes()[:4] == b"\x89PNG" and list(dump.glob("turn-*.json"))
