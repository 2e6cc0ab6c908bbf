"""Every framework example in examples/ runs offline and exits 0."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# The example file, and the module its framework's extra installs.
CASES = [
    ("langchain_agent.py", "langchain.agents"),
    ("pydantic_ai_agent.py", "pydantic_ai"),
    ("openai_agents_session.py", "agents"),
]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize(("name", "module"), CASES)
def test_example_runs_offline(name: str, module: str) -> None:
    # covers: INT-1
    if not _installed(module):
        pytest.skip(f"{module} is not installed (its comal extra is absent)")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()
