"""Issue 18: what the model writes must not act on the terminal that shows it.

``comal -p`` streamed the model's text to stderr and printed its answer on stdout raw, so an
answer holding ``ESC [2J`` cleared the user's screen, ``ESC ]52`` wrote the clipboard and
``U+202E`` reversed what the user read. The real CLI runs here as a process under a pseudo
terminal, with a ``script:`` model whose text, tool name and answer carry such sequences: on a
terminal nothing of them reaches it unescaped. The TUI's approval dialog shows the rule
"always" would add (the call's subject) escaped too.

Issue 30 (item 7): through a pipe the answer used to be byte for byte the model's text, so
``comal -p … > out.txt`` and a later ``cat out.txt`` (or ``| less -R``) cleared the screen all
the same. Now the answer is escaped wherever stdout goes, ``--json`` always writes such
characters as JSON escapes (the same value: the exact text is there), and every command that
prints a session's text — ``show``, ``export``, ``evidence``, ``receipts``, ``events``,
``search``, ``replay``, ``reconcile``, ``sessions`` — shows it escaped, through a pipe too.
"""

# covers: OPS-2, OPS-5

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
from collections.abc import Iterator

import pytest
from textual.app import App
from textual.widgets import Static

from _home_support import User, real_user
from comal.ops import Actor, ApprovalRequest, Effect, Rule
from comal.tui import ApprovalScreen

# Clear the screen, home the cursor, write the clipboard (OSC 52), retitle the window, reverse
# the text (U+202E), and the 8-bit CSI (U+009B) some terminals take for ESC [.
HOSTILE = "\x1b[2J\x1b[H\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\u202e\x9b31m"
ACTING = [b"\x1b", b"\x07", "\u202e".encode(), "\x9b".encode()]
ANSWER = f"Done {HOSTILE} end\r\nsecond line"


@pytest.fixture
def user() -> Iterator[User]:
    yield from real_user()


# The script's hostile call names no operation: refused by its contract, a mistake told to
# the model, not a denial of the work (the run still succeeds).
DENIED = 0


def _script(user: User) -> str:
    call = {"type": "tool_use", "id": "t1", "name": f"Nope{HOSTILE}", "input": {"x": HOSTILE}}
    first = {"content": [{"type": "text", "text": f"Looking {HOSTILE} now."}, call]}
    return str(user.script(first, {"content": ANSWER}))


def _run(user: User, *args: str, stdout_tty: bool) -> tuple[int, bytes, bytes]:
    """``comal -p`` with stderr on a pseudo terminal and stdout on another (or a pipe); what
    each received, byte for byte. TERM=dumb: comal's own styling sends no escape either."""
    out_r, out_w = pty.openpty() if stdout_tty else os.pipe()
    err_r, err_w = pty.openpty()
    argv = [sys.executable, "-m", "comal", "-p", "look", "--mode", "trusted", *args]
    proc = subprocess.Popen(
        argv, cwd=user.ws, env=user.env(TERM="dumb"), stdin=subprocess.DEVNULL,
        stdout=out_w, stderr=err_w,
    )  # fmt: skip
    os.close(out_w)
    os.close(err_w)
    got = {out_r: b"", err_r: b""}
    open_fds = [out_r, err_r]
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [], 120)
        assert ready, "comal -p went quiet for two minutes"
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # a pseudo terminal whose other end closed
                chunk = b""
            if chunk:
                got[fd] += chunk
            else:
                open_fds.remove(fd)
                os.close(fd)
    return proc.wait(60), got[out_r], got[err_r]


def test_on_a_terminal_nothing_the_model_wrote_acts_on_it(user: User) -> None:
    code, out, err = _run(user, "--model", f"script:{_script(user)}", stdout_tty=True)
    assert code == DENIED, err
    for stream in (out, err):
        assert not [seq for seq in ACTING if seq in stream], stream
    # Shown, not hidden: the escapes are there to read, on both streams.
    assert b"Done \\x1b[2J\\x1b[H\\x1b]52;c;cHduZWQ=\\x07" in out and b"\\u202e" in out
    assert b"Looking \\x1b[2J" in err and b"Nope\\x1b[2J" in err
    assert b"second line" in out


def test_through_a_pipe_the_answer_is_escaped_too(user: User) -> None:
    code, out, err = _run(user, "--model", f"script:{_script(user)}", stdout_tty=False)
    assert code == DENIED, err
    assert not [seq for seq in ACTING if seq in out + err], out
    assert out.startswith(b"Done \\x1b[2J\\x1b[H\\x1b]52;c;cHduZWQ=\\x07") and b"\\u202e" in out
    assert out.endswith(b" end\nsecond line\n")  # CRLF read as the line break it is
    # --json through a pipe: the same value, the model's exact text, nothing that acts.
    code, out, err = _run(user, "--json", "--model", f"script:{_script(user)}", stdout_tty=False)
    assert code == DENIED, err
    assert not [seq for seq in ACTING if seq in out]
    assert json.loads(out.decode())["answer"] == ANSWER


def test_every_command_that_prints_a_session_shows_it_escaped(user: User) -> None:
    # A session whose prompt, call ids, arguments, tool output and answer carry the sequences.
    hostile_id = f"w{HOSTILE}"
    calls = [
        {"type": "tool_use", "id": hostile_id, "name": "Write",
         "input": {"path": "note.txt", "content": f"note {HOSTILE}\n"}},
        {"type": "tool_use", "id": "r1", "name": "Read", "input": {"path": "note.txt"}},
    ]  # fmt: skip
    script = user.script(
        {"content": [{"type": "text", "text": f"Writing {HOSTILE}"}, *calls]},
        {"content": ANSWER},
    )
    ran = user.comal(
        "-p", f"look {HOSTILE}", "--mode", "trusted", "--model", f"script:{script}", "--json"
    )
    assert ran.returncode == 0, ran.stderr
    session = json.loads(ran.stdout.splitlines()[-1])["session"]
    with user.ledger() as led:
        scope = led.resolve(session)
        read = next(e for e in led.entries(scope) if e.message.tool_result is not None
                    and e.message.tool_result.call_id == "r1")  # fmt: skip
    commands = [
        ["show", session], ["show", session, "--json"],
        ["export", session], ["export", session, "--format", "anthropic"],
        ["export", session, "--format", "markdown"],
        ["evidence", session, "--entry", str(read.id)],
        ["evidence", session, "--entry", str(read.id), "--json"],
        ["receipts", session], ["receipts", session, "--json"],
        ["events", session], ["events", session, "--json"],
        ["search", "note", "--session", session], ["search", "note", "--json"],
        ["replay", session], ["reconcile", session, "--workspace", str(user.ws)],
        ["sessions"], ["sessions", "--json"],
    ]  # fmt: skip
    for argv in commands:
        run = subprocess.run(
            [sys.executable, "-m", "comal", *argv], cwd=user.ws, env=user.env(TERM="dumb"),
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        assert run.returncode == 0, (argv, run.stderr)
        acting = [seq for seq in ACTING if seq in run.stdout + run.stderr]
        assert not acting, (argv, acting, run.stdout[:2000])
    # Escaped, not dropped: the exact text is still there to read.
    shown = subprocess.run(
        [sys.executable, "-m", "comal", "evidence", session, "--entry", str(read.id), "--json"],
        cwd=user.ws, env=user.env(), capture_output=True, text=True, timeout=120, check=False,
    ).stdout  # fmt: skip
    assert HOSTILE in json.loads(shown)["text"]


def test_json_on_a_terminal_is_the_same_value_without_acting_characters(user: User) -> None:
    code, out, err = _run(user, "--json", "--model", f"script:{_script(user)}", stdout_tty=True)
    assert code == DENIED, err
    assert not [seq for seq in ACTING if seq in out]
    assert json.loads(out.decode())["answer"] == ANSWER


def test_the_approval_dialog_shows_the_rule_always_would_add_escaped() -> None:
    # covers: OPS-2
    path = f"notes{HOSTILE}.txt"
    request = ApprovalRequest(
        "c1", "Write", Actor.user("ana"), "tui", {"path": path, "content": "x"}, "d" * 64,
        "mode:ask", "asks", (Effect("write", (path,)),),
    )  # fmt: skip
    seen: list[str] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(ApprovalScreen(request, Rule("Write", path, "allow")))

    async def drive() -> None:
        app = Host()
        async with app.run_test() as pilot:
            await pilot.pause(0.1)
            seen.extend(str(w.render()) for w in app.screen.query(Static))

    asyncio.run(drive())
    shown = "\n".join(seen)
    assert "always: adds the rule allow" in shown and "\\x1b[2J" in shown
    assert not [c for c in ("\x1b", "\x07", "\u202e", "\x9b") if c in shown]
