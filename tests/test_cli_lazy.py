"""``comal NAME`` imports only NAME's module (start-up, issue 10); the table that says where each
command lives must match the modules, or a command would vanish or load the wrong code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer.main

from comal.cli import COMMAND_MODULES, app, build_app

# covers: OPS-1


def _names(t: typer.Typer) -> set[str]:
    group = typer.main.get_command(t)
    return set(getattr(group, "commands", {}))


def test_the_table_names_every_command_and_its_module() -> None:
    assert _names(app) == set(COMMAND_MODULES)
    for command, module in COMMAND_MODULES.items():
        assert command in _names(build_app([module])), (command, module)


def test_a_command_loads_only_its_own_module(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    probe = (
        "import sys\n"
        "from comal.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('comal.cli.')), file=sys.stderr)\n"
    )

    def loaded(*args: str) -> list[str]:
        run = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=False
        )
        out: list[str] = json.loads(run.stderr.strip().splitlines()[-1].replace("'", '"'))
        return out

    listing = loaded("--ledger", str(db), "sessions", "--json")
    assert "comal.cli._sessions" in listing
    assert not {"comal.cli._bench", "comal.cli._import", "comal.cli._engine"} & set(listing)
    everything = loaded("--help")
    assert {f"comal.cli.{m}" for m in set(COMMAND_MODULES.values())} <= set(everything)
