"""``comal -p`` in a terminal: the answer streams to stderr as it arrives and is printed once,
not streamed and then printed again; a pipe still gets it on stdout (run in a real pty)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

from _agent_support import reply, text, write_script

# covers: CFG-1

ANSWER = "The answer is forty-two, said once."


def _run(tmp_path: Path, *, stdout_tty: bool) -> tuple[str, str]:
    """The terminal's text and the piped stdout of one ``comal -p`` run."""
    script = write_script(tmp_path / "s.jsonl", [reply(text(ANSWER))])
    args = [sys.executable, "-m", "comal", "--ledger", str(tmp_path / f"l{stdout_tty}.db"),
            "-p", "hello", "--model", f"script:{script}"]  # fmt: skip
    main, child = pty.openpty()
    stdout = child if stdout_tty else subprocess.PIPE
    with subprocess.Popen(args, stdin=child, stdout=stdout, stderr=child) as proc:
        os.close(child)
        seen = b""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        piped = proc.stdout.read() if proc.stdout is not None else b""
        assert proc.wait(timeout=60) == 0, seen.decode(errors="replace")
    os.close(main)
    return seen.decode(errors="replace"), piped.decode(errors="replace")


def test_the_answer_shows_once_in_a_terminal(tmp_path: Path) -> None:
    shown, _ = _run(tmp_path, stdout_tty=True)
    assert shown.count(ANSWER) == 1, shown


def test_a_pipe_still_gets_the_answer(tmp_path: Path) -> None:
    shown, piped = _run(tmp_path, stdout_tty=False)
    assert piped.strip() == ANSWER and shown.count(ANSWER) == 1, (shown, piped)


def test_the_answer_shows_once_when_both_streams_are_captured(tmp_path: Path) -> None:
    """``comal -p ... 2>&1 | tee log`` and ``> out 2>&1``: stdout and stderr are one pipe or
    one file, where the streamed answer was already written; it is not written again."""
    script = write_script(tmp_path / "s.jsonl", [reply(text(ANSWER))])
    args = [sys.executable, "-m", "comal", "--ledger", str(tmp_path / "l.db"),
            "-p", "hello", "--model", f"script:{script}"]  # fmt: skip
    piped = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True)
    assert piped.stdout.decode().count(ANSWER) == 1, piped.stdout.decode()
    log = tmp_path / "out.txt"
    with log.open("wb") as both:
        subprocess.run(args, stdout=both, stderr=both, check=True)
    assert log.read_text().count(ANSWER) == 1, log.read_text()
    # Apart, each stream keeps its own copy: stdout alone still has the answer.
    apart = subprocess.run(args, capture_output=True, check=True)
    assert apart.stdout.decode().strip() == ANSWER, apart
