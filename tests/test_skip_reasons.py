"""``make test`` says why each test it skips is skipped (issue 32, item 11): pytest lists every
skip with its reason (``-rs`` in the configuration), and every skip in the suite gives a reason
that names what is missing and how to get it, not only that something is."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# A reason is a sentence: what is missing, and how to get it.
MIN_WORDS = 5


def test_a_skip_is_listed_with_its_reason() -> None:
    # covers: LED-4
    env = {k: v for k, v in os.environ.items() if k != "COMAL_TEST_PG"}
    test = "tests/test_surfaces.py::test_a_postgres_session_lock_holds_across_connections"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", test, "-p", "no:cacheprovider"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SKIPPED [1] tests/test_surfaces.py" in run.stdout, run.stdout
    assert "COMAL_TEST_PG not set" in run.stdout and ".ci/run postgres" in run.stdout


def _words(node: ast.expr | None) -> int:
    """Words written in a reason (an f-string's literal parts count, its values do not)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return len(node.value.split())
    if isinstance(node, ast.JoinedStr):
        return sum(_words(v) for v in node.values if isinstance(v, ast.Constant))
    return 0


def _skips(tree: ast.AST) -> list[tuple[int, str, ast.expr | None]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        reason = next((k.value for k in node.keywords if k.arg == "reason"), None)
        if name == "skip" and node.args:
            found.append((node.lineno, name, reason or node.args[0]))
        elif name == "skipif":
            found.append((node.lineno, name, reason))
        elif name == "importorskip":
            found.append((node.lineno, name, reason))
    return found


def test_every_skip_says_what_is_missing() -> None:
    # covers: LED-4
    vague = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for line, name, reason in _skips(ast.parse(path.read_text(), str(path))):
            if _words(reason) < MIN_WORDS:
                vague.append(f"{path.relative_to(REPO)}:{line}: {name} without a specific reason")
    assert not vague, "\n".join(vague)
