"""``make demo``, the first thing a new user runs (issue 19): it must finish wherever the clone
is (people clone under /tmp, which the sandbox makes private) and whether or not the machine
has bubblewrap (``make demo`` does not install it)."""

# covers: OPS-3, RES-5

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from _home_support import path_without
from comal.ops import sandbox_status

SRC = Path(__file__).resolve().parent.parent / "src"
BOX = sandbox_status()


def _demo(cwd: Path, python: str = sys.executable, **env: str) -> str:
    done = subprocess.run(
        [python, "-m", "comal.demo"],
        cwd=cwd,
        env=os.environ | {"COLUMNS": "1000"} | env,  # no wrapped lines
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "calc.py now divides by: (len(values))" in out
    return out


def test_the_demo_finishes_without_a_sandbox_and_says_so_once(tmp_path: Path) -> None:
    out = _demo(tmp_path, PATH=path_without("bwrap", tmp_path / "bin"))
    assert out.count("No OS sandbox here: bubblewrap (bwrap) is not installed") == 1
    flat = " ".join(out.split())  # the console wraps long lines
    assert "With bubblewrap each would run as: bwrap --ro-bind / / --dev /dev" in flat
    assert f"bash -c '{sys.executable} check.py'" in flat
    assert "denied" not in out and "SCRIPT_EXHAUSTED" not in out
    assert f"check `{sys.executable} check.py`: ok" in out


def test_the_demo_finishes_from_a_clone_under_tmp(tmp_path: Path) -> None:
    if not BOX.available and os.environ.get("CI") != "true":
        pytest.skip(f"the OS sandbox is not usable here: {BOX.reason}")
    clone = tmp_path / "clone"  # under /tmp, hidden by the sandbox's private /tmp
    shutil.copytree(SRC, clone / "src", ignore=shutil.ignore_patterns("__pycache__"))
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # The clone's own venv, with this one's dependencies; its code is the clone's.
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = str(venv / "bin" / "python")
    out = _demo(clone, python, PYTHONPATH=str(clone / "src"))
    assert "sandbox: active" in out and "No OS sandbox" not in out
    assert f"check `{python} check.py`: ok" in out


def test_the_sandbox_shows_every_folder_the_interpreter_links_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A venv made by a `python3` that was itself a link in a folder under /tmp (a PATH of
    # shims) ran nowhere in the sandbox: its private /tmp hid the link's target.
    from comal.ops import _sandbox

    shims, venv = tmp_path / "shims", tmp_path / "venv" / "bin"
    shims.mkdir()
    venv.mkdir(parents=True)
    (shims / "python3").symlink_to(os.path.realpath(sys.executable))
    (venv / "python3").symlink_to(shims / "python3")
    (venv / "python").symlink_to("python3")
    monkeypatch.setattr(_sandbox.sys, "executable", str(venv / "python"))
    homes = _sandbox._python_homes()
    assert str(shims) in homes and str(venv) in homes
