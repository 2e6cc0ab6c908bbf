"""Issue 30, item 2: a plugin the model writes into its workspace never runs in comal's process.

The model can Write any file of its workspace: a ``*.dist-info/entry_points.txt`` naming a
module beside it, or a module named like one comal imports. ``python -m comal`` started from
that folder puts the folder first on ``sys.path``, and ``importlib.metadata.entry_points()``
scans ``sys.path``, so the planted plugin was imported in comal's own process, outside the
sandbox; a console script run with a ``PYTHONPATH`` holding an empty entry (``:/x``, the
usual ``$PYTHONPATH:/x`` with nothing before it) did the same. Each test plants the files in a
real folder and starts the real command there; the planted module writes a marker file when
it is imported, so "never imported" is seen, not inferred.
"""

# covers: PLG-1, CFG-2

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _home_support import User, real_user
from comal.agent import load_config
from comal.plugins import PluginLoadError, plugin_infos, reset_plugins

COMAL = Path(sys.executable).parent / "comal"
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def user() -> Iterator[User]:
    yield from real_user()


def plant(folder: Path, marker: Path, *, module: str = "planted_plugin") -> None:
    """What the model can Write into its workspace: a module that marks its import, and the
    dist-info that declares it a comal plugin."""
    (folder / f"{module}.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
    )
    dist = folder / "planted-1.0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: planted\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[comal.plugins]\nplanted = {module}\n")


def _names(run: subprocess.CompletedProcess[str]) -> list[str]:
    assert run.returncode == 0, run.stderr
    return [row["name"] for row in json.loads(run.stdout)]


def test_python_m_comal_in_a_planted_folder_loads_nothing_from_it(user: User) -> None:
    marker = user.base / "imported.txt"
    plant(user.ws, marker)
    assert "planted" not in _names(user.comal("plugins", "--json"))
    script = user.script({"content": "hello"})
    ran = user.comal("-p", "hi", "--model", f"script:{script}", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.splitlines()[-1])["answer"] == "hello"
    assert not marker.exists()


def test_a_module_planted_under_a_name_comal_imports_is_not_imported(user: User) -> None:
    # comal reads its configuration with PyYAML when it is there: `import yaml` must not find
    # a yaml.py the model wrote.
    marker = user.base / "shadowed.txt"
    (user.ws / "yaml.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
    )
    run = user.comal("plugins", "--json")
    assert run.returncode == 0, run.stderr
    assert not marker.exists()


def test_the_console_script_with_an_empty_pythonpath_entry_loads_nothing_from_here(
    user: User,
) -> None:
    marker = user.base / "imported.txt"
    plant(user.ws, marker)
    # "$PYTHONPATH:/x" with PYTHONPATH unset: the empty entry is the current folder.
    env = user.env(PYTHONPATH=os.pathsep + str(SRC))
    run = subprocess.run(
        [str(COMAL), "plugins", "--json"], cwd=user.ws, env=env, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "planted" not in _names(run)
    assert not marker.exists()


def test_the_library_finds_no_plugin_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A program embedding comal, run from the folder (a script beside it puts the folder on
    # sys.path): no entry point from there, and a module the configuration names that would
    # be imported from there is refused before it is imported.
    here = tmp_path / "here"
    here.mkdir()
    marker = tmp_path / "imported.txt"
    plant(here, marker)
    monkeypatch.chdir(here)
    monkeypatch.syspath_prepend(str(here))
    reset_plugins()
    try:
        assert "planted" not in [p.name for p in plugin_infos()]
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"plugins": ["planted_plugin"]}))
        with pytest.raises(PluginLoadError) as info:
            load_config(config)
        assert info.value.code == "PLUGIN_LOAD" and "current folder" in str(info.value)
        assert not marker.exists()
    finally:
        reset_plugins()
        sys.modules.pop("planted_plugin", None)
