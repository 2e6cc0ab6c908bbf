"""Issue 18: Glob and Grep over a tree the model built to break them.

Write makes every missing parent, so a model can make a directory 2,500 levels deep (or one
with more names than any search should read). ``os.fwalk`` recursed once per level, and Glob's
matcher once per path segment: both tools failed with ``RecursionError`` (an error receipt with
the code ``BUG``). Now the walk and the match are iterative, the walk stops at a depth and an
entry bound, and the result says what a bound left out; a narrower path reaches the rest.
"""

# covers: OPS-1, OPS-3

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _ops_support import Setup, call, propose
from comal.ops import _files_search

from ._sec_support import finishes

DEPTH = 2_500
MAX_DEPTH = 256  # comal.ops._walk.MAX_DEPTH, pinned: the result must say it
DEEP = "/".join(["d"] * DEPTH)


def _tool(s: Setup, name: str, **args: Any) -> tuple[str, dict[str, Any]]:
    got: list[Any] = []
    assert finishes(lambda: got.append(propose(s, call(name, args))), 60), f"{name} hung"
    outcome, receipt = got[0]
    assert receipt.status == "ok", (receipt.observations, outcome.result.text[:300])
    return outcome.result.text, receipt.observations


def _take_apart(top: Path) -> None:
    """Remove the chain from the top, one level at a time: ``shutil.rmtree`` (pytest's
    cleanup of old temporary directories included) recurses per level too."""
    spare = top.with_name("spare")
    while top.is_dir():
        if (top / "d").is_dir():
            (top / "d").rename(spare)
        for leftover in top.iterdir():
            leftover.unlink()
        top.rmdir()
        if spare.is_dir():
            spare.rename(top)


@pytest.fixture
def deep(s: Setup) -> Iterator[Setup]:
    # The model's own way to build it: one Write, every parent made on the way.
    try:
        _tool(s, "Write", path=f"{DEEP}/needle.txt", content="needle here\n")
        _tool(s, "Write", path="top.txt", content="needle on top\n")
        yield s
    finally:
        _take_apart(s.root / "d")


def test_glob_walks_a_2500_deep_tree_and_says_what_it_left_out(deep: Setup) -> None:
    from comal.ops._walk import MAX_DEPTH as bound

    assert bound == MAX_DEPTH
    text, seen = _tool(deep, "Glob", pattern="**/*.txt")
    assert text.splitlines()[0] == "top.txt"
    assert seen["walk"]["too_deep"] == 1 and seen["walk"]["max_depth"] == MAX_DEPTH
    assert f"1 directory deeper than {MAX_DEPTH} levels not entered" in text
    # The rest is one narrower path away, and a deep path matches without recursion.
    near = "/".join(["d"] * (DEPTH - 10))
    text, seen = _tool(deep, "Glob", pattern="**/needle.txt", path=near)
    assert text == f"{DEEP}/needle.txt" and seen["walk"]["too_deep"] == 0


def test_grep_walks_a_2500_deep_tree_and_says_what_it_left_out(deep: Setup) -> None:
    text, seen = _tool(deep, "Grep", pattern="needle")
    assert text.splitlines()[0] == "top.txt" and seen["walk"]["too_deep"] == 1
    assert f"deeper than {MAX_DEPTH} levels not entered" in text
    near = "/".join(["d"] * (DEPTH - 10))
    text, _ = _tool(deep, "Grep", pattern="needle", path=near, output_mode="content")
    assert text == f"{DEEP}/needle.txt:1:needle here"


def test_the_entry_bound_stops_a_walk_and_is_reported(
    s: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comal.ops._walk import Walk

    for i in range(60):
        (s.root / f"f{i:03}.txt").write_text("needle\n")
    monkeypatch.setattr(_files_search, "Walk", lambda: Walk(max_entries=25))
    for name, args in (("Glob", {"pattern": "*.txt"}), ("Grep", {"pattern": "needle"})):
        text, seen = _tool(s, name, **args)
        assert seen["walk"]["stopped"] is True and seen["walk"]["entries"] == 25
        assert "the walk stopped after 25 entries" in text
        assert len([ln for ln in text.splitlines() if ln.endswith(".txt")]) == 25
