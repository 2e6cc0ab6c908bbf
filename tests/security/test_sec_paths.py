"""Issue 9 §1: file tools cannot be raced or tricked out of the workspace.

Each test is one probe case. Races run a bounded number of calls against a thread that swaps a
directory for a symlink to the outside; they must show 0 escapes, 0 exceptions out of the
house, and a receipt for every call.
"""

# covers: OPS-2, OPS-3, OPS-5, EVI-4

from __future__ import annotations

import os
import resource
import socket
import stat
from pathlib import Path

import pytest

from _ops_support import Setup

from ._sec_support import Racer, Tally, attempt, finishes, swap_dir_for_symlink

RACE_CALLS = 400
SECRET = "OUTSIDE-SECRET-BYTES"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "f.txt").write_text(SECRET + "\n")
    return out


def listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_read_symlink_swap_race(s: Setup, outside: Path) -> None:
    (s.root / "d").mkdir()
    (s.root / "d" / "f.txt").write_text("inside\n")
    tally = Tally()
    with Racer(swap_dir_for_symlink(s.root / "d", outside)) as racer:
        for _ in range(RACE_CALLS):
            outcome = attempt(s, tally, "Read", {"path": "d/f.txt"})
            assert outcome is None or SECRET not in outcome.result.text
    assert racer.rounds > 0
    assert tally.escaped == []
    assert tally.receipts == tally.calls == RACE_CALLS
    assert tally.statuses.get("ok", 0) > 0  # the race lets some reads through, inside


def test_write_symlink_swap_race(s: Setup, outside: Path) -> None:
    (s.root / "d").mkdir()
    before = listing(outside)
    tally = Tally()
    with Racer(swap_dir_for_symlink(s.root / "d", outside)):
        for i in range(RACE_CALLS):
            attempt(s, tally, "Write", {"path": f"d/new{i % 7}.txt", "content": f"x{i}"})
            attempt(s, tally, "Write", {"path": "d/f.txt", "content": f"clobber {i}"})
    assert listing(outside) == before  # not one byte landed outside
    assert tally.escaped == []
    assert tally.receipts == tally.calls == 2 * RACE_CALLS
    assert "uncertain" not in tally.statuses  # a refused write is known not to have landed


def test_write_does_not_follow_a_symlink_planted_at_its_temp_file(s: Setup, outside: Path) -> None:
    victim = outside / "f.txt"
    # The name the old atomic write used, and a spread of guesses around it.
    for name in [f".f.txt.comal-{os.getpid()}.tmp", ".f.txt.tmp", ".f.txt.comal.tmp"]:
        os.symlink(victim, s.root / name)
    tally = Tally()
    outcome = attempt(s, tally, "Write", {"path": "f.txt", "content": "mine\n"})
    assert outcome is not None and outcome.receipt.status == "ok"
    assert victim.read_text() == SECRET + "\n"
    assert (s.root / "f.txt").read_text() == "mine\n" and not (s.root / "f.txt").is_symlink()


def test_write_fails_closed_when_every_temp_name_is_planted(
    s: Setup, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import comal.ops._workspace as workspace_module

    monkeypatch.setattr(workspace_module.secrets, "token_hex", lambda n: "planted")
    os.symlink(outside / "f.txt", s.root / f".f.txt.comal-{os.getpid()}-planted.tmp")
    tally = Tally()
    outcome = attempt(s, tally, "Write", {"path": "f.txt", "content": "mine\n"})
    assert outcome is not None and outcome.receipt.status == "error"
    assert outcome.receipt.observations["error"] == "TOOL_FAILURE"
    assert (outside / "f.txt").read_text() == SECRET + "\n"
    assert not (s.root / "f.txt").exists()


@pytest.mark.parametrize("tool", ["Read", "Write", "Edit", "Grep", "Glob"])
def test_symlink_loop(s: Setup, tool: str) -> None:
    os.symlink("loop", s.root / "loop")
    os.symlink("b", s.root / "a")
    os.symlink("a", s.root / "b")
    (s.root / "ok.txt").write_text("needle\n")
    args: dict[str, dict[str, object]] = {
        "Read": {"path": "a"},
        "Write": {"path": "loop/x", "content": "x"},
        "Edit": {"path": "b", "old_string": "n", "new_string": "m"},
        "Grep": {"pattern": "needle", "path": "."},  # walks past the loops
        "Glob": {"pattern": "**/*"},
    }
    tally = Tally()
    outcome = attempt(s, tally, tool, args[tool])
    assert tally.escaped == [] and outcome is not None
    r = outcome.receipt
    if tool in ("Grep", "Glob"):
        assert r.status == "ok" and "ok.txt" in outcome.result.text
    else:
        assert r.status == "denied" and r.judgment["rule"] == "workspace"
        assert "SYMLINK_LOOP" in r.judgment["reason"]


def test_symlink_loop_appearing_after_judgment(s: Setup) -> None:
    (s.root / "d").mkdir()
    (s.root / "d" / "f.txt").write_text("x\n")

    def loop_after_judgment(phase: str, call_id: str) -> None:
        if phase == "judged":
            os.rename(s.root / "d", s.root / "d.real")
            os.symlink("d", s.root / "d")

    s.house._probe = loop_after_judgment
    tally = Tally()
    outcome = attempt(s, tally, "Read", {"path": "d/f.txt"})
    assert tally.escaped == [] and outcome is not None
    assert outcome.receipt.status == "error"
    assert outcome.receipt.observations["error"] == "WORKSPACE_ESCAPE"


def test_fifo_is_refused_and_never_blocks(s: Setup) -> None:
    os.mkfifo(s.root / "pipe")
    (s.root / "text.txt").write_text("needle\n")
    tally = Tally()
    results: dict[str, object] = {}

    def run() -> None:
        results["read"] = attempt(s, tally, "Read", {"path": "pipe"})
        results["grep-file"] = attempt(s, tally, "Grep", {"pattern": "x", "path": "pipe"})
        results["grep-dir"] = attempt(s, tally, "Grep", {"pattern": "needle"})
        results["edit"] = attempt(
            s, tally, "Edit", {"path": "pipe", "old_string": "a", "new_string": "b"}
        )
        results["write"] = attempt(s, tally, "Write", {"path": "pipe", "content": "x"})

    assert finishes(run), "a file tool blocked on a FIFO"
    assert tally.escaped == [] and tally.receipts == 5
    for key in ("read", "grep-file", "edit", "write"):
        r = results[key].receipt  # type: ignore[attr-defined]
        assert (r.status, r.observations.get("error")) == ("error", "NOT_REGULAR_FILE"), key
    grep_dir = results["grep-dir"]
    assert grep_dir.receipt.status == "ok"  # type: ignore[attr-defined]
    assert grep_dir.result.text == "text.txt"  # type: ignore[attr-defined]
    assert grep_dir.receipt.observations["skipped"] == 1  # type: ignore[attr-defined]
    assert stat.S_ISFIFO(os.stat(s.root / "pipe").st_mode)  # the Write did not replace it


def test_socket_and_device_are_refused(s: Setup) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(s.root / "sock"))
    try:
        os.mknod(s.root / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
        kinds = ["sock", "zero"]
    except PermissionError:
        kinds = ["sock"]
    tally = Tally()
    for name in kinds:
        outcome = attempt(s, tally, "Read", {"path": name})
        assert outcome is not None and outcome.receipt.observations["error"] == "NOT_REGULAR_FILE"
    server.close()
    assert tally.escaped == []


def rss_peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_sparse_file(s: Setup) -> None:
    text = "".join(f"line {i}\n" for i in range(2000)).encode()
    with open(s.root / "sparse.log", "wb") as fh:
        fh.write(text)
        fh.truncate(10 * 1024**3)  # 10 GB: text, then a hole of zeros
    with open(s.root / "hole.bin", "wb") as fh:
        fh.truncate(10 * 1024**3)
    before = rss_peak()
    tally = Tally()
    page = attempt(s, tally, "Read", {"path": "sparse.log", "limit": 1})
    later = attempt(s, tally, "Read", {"path": "sparse.log", "offset": 1500, "limit": 2})
    hole = attempt(s, tally, "Read", {"path": "hole.bin", "limit": 1})
    assert tally.escaped == [] and page is not None and later is not None and hole is not None
    assert page.receipt.status == "ok"
    assert page.result.text.startswith("     1\tline 0\n[")
    assert "offset=2)]" in page.result.text and page.receipt.observations["streamed"] is True
    assert later.result.text.startswith("  1500\tline 1499\n  1501\tline 1500\n[")
    assert hole.receipt.status == "error" and "binary" in hole.result.text
    assert rss_peak() - before < 64 * 1024 * 1024  # nothing near 10 GB was loaded


@pytest.mark.parametrize(
    "case",
    [
        "absolute-outside",
        "dotdot",
        "dotdot-after-subdir",
        "symlinked-dir-outside",
        "absolute-symlink-outside",
        "nul-byte",
    ],
)
def test_path_escape_spellings(s: Setup, outside: Path, case: str) -> None:
    (s.root / "sub").mkdir()
    os.symlink(outside, s.root / "out-dir")
    os.symlink(outside / "f.txt", s.root / "out-file")
    path = {
        "absolute-outside": str(outside / "f.txt"),
        "dotdot": "../outside/f.txt",
        "dotdot-after-subdir": "sub/../../outside/f.txt",
        "symlinked-dir-outside": "out-dir/f.txt",
        "absolute-symlink-outside": "out-file",
        "nul-byte": "sub/\x00x",
    }[case]
    tally = Tally()
    outcome = attempt(s, tally, "Read", {"path": path})
    assert tally.escaped == [] and outcome is not None
    assert outcome.receipt.status == "denied" and outcome.receipt.judgment["rule"] == "workspace"
    assert "WORKSPACE_ESCAPE" in outcome.receipt.judgment["reason"]
    assert SECRET not in outcome.result.text


def test_symlinks_inside_the_workspace_are_followed_there(s: Setup) -> None:
    (s.root / "real").mkdir()
    (s.root / "real" / "f.txt").write_text("inside\n")
    os.symlink("real", s.root / "rel-link")
    os.symlink(s.root / "real" / "f.txt", s.root / "abs-link")
    tally = Tally()
    for path in ("rel-link/f.txt", "abs-link"):
        outcome = attempt(s, tally, "Read", {"path": path})
        assert outcome is not None and outcome.receipt.status == "ok", path
        assert outcome.receipt.effects[0].paths == ("real/f.txt",)  # the judged, real path
    written = attempt(s, tally, "Write", {"path": "rel-link/f.txt", "content": "new\n"})
    assert written is not None and written.receipt.observations["path"] == "real/f.txt"
    assert (s.root / "real" / "f.txt").read_text() == "new\n"
    assert (s.root / "rel-link").is_symlink()


def test_os_errors_become_coded_receipts(s: Setup) -> None:
    (s.root / "f.txt").write_text("x\n")
    (s.root / "dir").mkdir()
    tally = Tally()
    cases = [
        ("Read", {"path": "f.txt/below"}, "TOOL_FAILURE"),
        ("Read", {"path": "dir"}, "NOT_REGULAR_FILE"),
        ("Read", {"path": "missing.txt"}, "TOOL_FAILURE"),
        ("Write", {"path": "dir", "content": "x"}, "NOT_REGULAR_FILE"),
        ("Grep", {"pattern": "x", "path": "missing"}, "TOOL_FAILURE"),
        ("Glob", {"pattern": "*", "path": "f.txt"}, "TOOL_FAILURE"),
    ]
    for name, args, code in cases:
        outcome = attempt(s, tally, name, args)
        assert outcome is not None, (name, args)
        r = outcome.receipt
        got = r.observations.get("error") or r.judgment["reason"]
        assert r.status in ("error", "denied") and code in str(got), (name, args, got)
    assert tally.escaped == [] and tally.receipts == len(cases)
