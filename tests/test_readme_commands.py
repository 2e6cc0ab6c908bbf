"""Every command and flag the README shows exists (``--help`` of each one runs).

# covers: CFG-1
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

from comal.cli import COMMAND_MODULES

README = Path(__file__).resolve().parents[1] / "README.md"
GROUPS = {"bench", "config", "keys", "memory"}
# Options of the root command, valid before or after any command.
ROOT_OPTIONS = {"--ledger", "--help", "--version"}


def _shown() -> list[str]:
    """``comal …`` command lines from the README's code blocks and inline code."""
    text = README.read_text(encoding="utf-8")
    found: list[str] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip().removeprefix("$ ")
            found += [m for m in re.findall(r"(?:^|&&|\|)\s*(comal\s[^|&]*)", line)]
    found += re.findall(r"`(comal\s[^`]*)`", text)
    return [c.strip() for c in found if c.strip() != "comal"]


def _words(line: str) -> list[str]:
    line = re.sub(r"[\[\]|]", " ", line)  # a synopsis: `comal [-p PROMPT|-] [--resume ID | -c]`
    try:
        return shlex.split(line)[1:]
    except ValueError:
        return line.split()[1:]


@cache
def _help(*path: str) -> str:
    """``comal PATH --help`` in its own process, as a user runs it: only the command's own
    module is loaded there (a command registered from another module is missing, as
    ``comal bench proxy`` was while every in-process test saw it)."""
    env = os.environ | {"COLUMNS": "200", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "comal", *path, "--help"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, f"comal {' '.join(path)} --help: {result.stderr}"
    return result.stdout


def _command(words: list[str]) -> tuple[str, ...]:
    """The command path a README line runs (``()``: the agent, ``comal -p``/TUI)."""
    words = [w for w in words if w not in ROOT_OPTIONS]
    if not words or words[0].startswith("-"):
        return ("agent",)
    head = words[0]
    if head in GROUPS and len(words) > 1 and not words[1].startswith("-"):
        return (head, words[1])
    return (head,)


def test_the_readme_shows_commands() -> None:
    assert len(_shown()) > 20


def test_every_command_the_readme_shows_exists() -> None:
    unknown = []
    for line in _shown():
        path = _command(_words(line))
        if path[0] not in {*COMMAND_MODULES, "agent"}:
            unknown.append(line)
            continue
        _help(*path)
    assert unknown == []


def test_every_flag_the_readme_shows_exists() -> None:
    missing = []
    for line in _shown():
        words = _words(line)
        path = _command(words)
        options = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", _help(*path)))
        # A lone "-" is stdin (`comal -p -`), not a flag.
        for flag in (w.split("=", 1)[0] for w in words if w.startswith("-") and w != "-"):
            if flag not in options and flag not in ROOT_OPTIONS:
                missing.append(f"{line!r}: {flag}")
    assert missing == []
