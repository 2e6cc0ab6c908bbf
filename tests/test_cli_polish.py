"""The small things a first day with ``comal`` trips on (issue 32, item 11), each run as a
person runs it: ``comal`` in a process, in a home of its own."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from _home_support import User, real_user


@pytest.fixture
def user(monkeypatch: pytest.MonkeyPatch) -> Iterator[User]:
    for person in real_user():
        # A ledger a test writes in process keeps its key where that person's comal looks.
        monkeypatch.setenv("XDG_STATE_HOME", str(person.home / ".local" / "state"))
        yield person


def test_sessions_on_a_fresh_install_is_an_empty_list(user: User) -> None:
    # covers: LED-3
    shown = user.comal("sessions")
    assert shown.returncode == 0, shown.stderr
    assert "no sessions yet" in shown.stdout and str(user.ledger_path) in shown.stdout
    listed = user.comal("sessions", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
    assert not user.ledger_path.exists()  # listing creates nothing
    # A ledger the person named and mistyped is still said to be missing.
    typo = user.comal("sessions", "--ledger", str(user.base / "typo.db"))
    assert typo.returncode == 2 and "LEDGER_NOT_FOUND" in typo.stderr, typo.stderr
    env_typo = user.comal("sessions", COMAL_LEDGER=str(user.base / "typo.db"))
    assert env_typo.returncode == 2 and "LEDGER_NOT_FOUND" in env_typo.stderr


def _long_session(user: User) -> str:
    from comal.messages import Message

    with user.ledger() as led:
        scope = led.create_session("local", "comal", title="wide")
        led.append(scope, [Message.user("read the parser " * 30)])
        return scope.session


def test_show_through_a_pipe_is_laid_out_at_columns(user: User) -> None:
    # covers: LED-1
    session = _long_session(user)
    narrow = user.comal("show", session[:8], COLUMNS="72")
    assert narrow.returncode == 0, narrow.stderr
    widths = [len(line) for line in narrow.stdout.splitlines()]
    assert max(widths) <= 72 and "read the parser" in narrow.stdout, narrow.stdout
    # Unset, a pipe is still wide (a CI log), not rich's 80.
    wide = user.comal("show", session[:8])
    assert max(len(line) for line in wide.stdout.splitlines()) > 80, wide.stdout


def test_search_finds_the_text_as_written_and_marks_it(user: User) -> None:
    # covers: LED-5
    from comal.messages import Message

    texts = ["x y are two words", "call x.y() now", "ax.y() is another name", "X.Y()  twice"]
    far = "noise " * 2000 + "then x.y() at last"
    with user.ledger() as led:
        scope = led.create_session("local", "comal")
        for text in [*texts, far]:
            led.append(scope, [Message.user(text)])
    found = user.comal("search", "--json", "--", "x.y()")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert sorted(h["seq"] for h in hits) == [1, 3, 4], hits  # not "x y", not "ax.y()"
    for h in hits:
        assert [h["snippet"][a:b].lower() for a, b in h["marks"]] == ["x.y()"], h
    shown = user.comal("search", "--", "x.y()", COLUMNS="200")
    assert shown.stdout.count("⟦x.y()⟧") == 2 and "⟦X.Y()⟧" in shown.stdout, shown.stdout


def _filled(path: Path, sessions: int = 30) -> list[str]:
    from comal.ledger import open_ledger
    from comal.messages import Message

    made = []
    with open_ledger(path) as led:
        for k in range(sessions):
            scope = led.create_session("local", "comal")
            for i in range(20):
                led.append(scope, [Message.user(f"step {k}.{i} " * 40)])
            made.append(scope.session)
    return made


def test_verify_reports_a_ledger_cut_short_instead_of_failing_to_open_it(user: User) -> None:
    # covers: LED-1, OBS-2
    path = user.base / "cut.db"
    _filled(path)
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(size // 2 // 4096 * 4096 + 1000)  # half its pages, and a piece of one
    # Other commands cannot read it: a coded error, as before.
    shown = user.comal("--ledger", str(path), "show", "x")
    assert shown.returncode == 2 and "LEDGER_CORRUPT" in shown.stderr, shown.stderr
    # verify says what it can: exit 1 (faults), never the open error's exit 2.
    said = user.comal("--ledger", str(path), "verify")
    assert said.returncode == 1, (said.stdout, said.stderr)
    assert "Traceback" not in said.stderr and "error [" not in said.stderr
    assert "pages are missing" in said.stdout and "cut mid-write" in said.stdout, said.stdout
    report = json.loads(user.comal("--ledger", str(path), "verify", "--json").stdout)
    kinds = {(f["table"], f["kind"]) for f in report["faults"]}
    assert {("ledger", "open"), ("database", "truncated")} <= kinds, kinds
    assert not report["ok"] and report["sealing"].startswith("not checked")
    assert "seq -1" not in said.stdout and "None" not in said.stdout


def test_verify_says_a_session_lost_its_entries_in_words(user: User) -> None:
    # covers: LED-1
    import sqlite3

    path = user.base / "tail.db"
    first, second = _filled(path, sessions=2)
    with sqlite3.connect(path) as db:  # the tail is gone, as a restore of an old copy leaves it
        db.execute("DELETE FROM entries WHERE session_id = ?", (first,))
        db.execute("DELETE FROM entries WHERE session_id = ? AND seq >= 10", (second,))
    said = user.comal("--ledger", str(path), "verify")
    assert said.returncode == 1, said.stderr
    assert "seq -1" not in said.stdout and "None" not in said.stdout, said.stdout
    assert f"session {first}: truncated" in said.stdout and "no entry is stored" in said.stdout
    assert f"session {second}: truncated" in said.stdout and "stored is seq 9" in said.stdout


def test_ctrl_c_in_import_says_what_was_imported_then_exits_130(user: User) -> None:
    # covers: LED-1
    import signal
    import subprocess
    import sys

    folder = user.base / "transcripts"
    folder.mkdir()
    for i in range(3000):
        messages = [
            {"role": "user", "content": f"task {i}"},
            {"role": "assistant", "content": "ok"},
        ]
        (folder / f"t{i:04d}.json").write_text(json.dumps(messages))
    path = user.base / "l.db"
    args = [sys.executable, "-m", "comal", "--ledger", str(path), "import", str(folder)]
    env = user.env(PYTHONUNBUFFERED="1")
    with subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:  # fmt: skip
        assert proc.stdout is not None
        seen = [proc.stdout.readline() for _ in range(5)]  # a few files are in
        assert all(line.startswith("imported") for line in seen), seen
        proc.send_signal(signal.SIGINT)
        rest, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (rest[-2000:], stderr[-2000:])
    summary = rest.strip().splitlines()[-1]
    assert "interrupted" in summary and "not imported" in summary, summary
    imported = sum(line.startswith("imported") for line in [*seen, *rest.splitlines()])
    assert f"3000 files: {imported} imported" in summary, summary
    assert "Traceback" not in stderr, stderr
    from comal.ledger import open_ledger

    with open_ledger(path, create=False) as led:  # what it said it stored is stored, whole
        assert len(led.sessions()) == imported


def test_export_to_an_unknown_format_is_a_coded_error_listing_the_formats(user: User) -> None:
    # covers: INT-2
    session = _long_session(user)
    said = user.comal("export", session[:8], "--format", "bogus")
    assert said.returncode == 2 and "[EXPORT_FORMAT]" in said.stderr, said.stderr
    for name in ("openai", "openai-responses", "anthropic", "markdown"):
        assert name in said.stderr, said.stderr
    as_json = user.comal("export", session[:8], "--format", "bogus", "--json")
    error = json.loads(as_json.stdout)["error"]
    assert as_json.returncode == 2 and error["code"] == "EXPORT_FORMAT", as_json.stdout


def test_markdown_export_shows_every_body_fenced_and_renders_none(user: User) -> None:
    # covers: LED-1, INT-2
    from markdown_it import MarkdownIt

    from comal.messages import Message, ToolCall

    said = "# Not a heading\n<img src=x onerror=alert(1)>\n![t](http://tracker/t.png)\n```\nout"
    answer = "**bold** [link](http://x) <script>x()</script>"
    call = ToolCall("c1", "Bash", json.dumps({"command": "echo '```'"}))
    output = "</details>\n## forged heading\n````\n<b>x</b>"
    with user.ledger() as led:
        scope = led.create_session("local", "comal", title="![t](http://x/t.png) <b>hi</b> #")
        led.append(scope, [Message.user(said)])
        led.append(scope, [Message.assistant(answer, call), Message.tool("c1", output)])
        session = scope.session
    text = user.comal("export", session[:8], "--format", "markdown").stdout
    tokens = MarkdownIt("commonmark").parse(text)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[1:] == ["user", "assistant", "tool"], headings
    inline = [c for t in tokens if t.type == "inline" for c in (t.children or [])]
    rendered = {t.type for t in [*tokens, *inline]}
    assert not rendered & {"html_block", "html_inline", "image", "link_open"}, rendered
    fenced = [t.content.rstrip("\n") for t in tokens if t.type == "fence"]
    for body in (said, answer, call.arguments, output):
        assert body in fenced, (body, fenced)


def test_rm_answered_no_says_nothing_was_removed(user: User) -> None:
    # covers: LED-1
    import subprocess
    import sys

    session = _long_session(user)
    args = [sys.executable, "-m", "comal", "rm", session[:8]]
    kept = subprocess.run(args, input="n\n", capture_output=True, text=True, env=user.env(),
                          timeout=120)  # fmt: skip
    assert kept.returncode == 0, (kept.stdout, kept.stderr)
    assert f"nothing removed: {session} is kept" in kept.stdout, kept.stdout
    as_json = subprocess.run([*args, "--json"], input="n\n", capture_output=True, text=True,
                             env=user.env(), timeout=120)  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout.splitlines()[-1]) == {"session": session, "deleted": False}
    with user.ledger() as led:
        assert [s.id for s in led.sessions()] == [session]


def test_a_missing_key_on_the_command_line_says_what_to_export_and_which_models(
    user: User,
) -> None:
    # covers: CFG-1
    for args in (("-p", "hi"), ("-p", "hi", "--json"), ()):  # () opens the TUI: it stops first
        said = user.comal(*args, "--model", "anthropic:claude-sonnet-4-6")
        assert said.returncode == 2, (args, said.stdout, said.stderr)
        text = " ".join((said.stdout + said.stderr).split())
        assert "PROVIDER_MISSING_KEY" in text and "export ANTHROPIC_API_KEY=..." in text, text
        assert "--model" in text and "openai-compat:URL#MODEL" in text, text
        assert "api_key=" not in text, text


def test_fakeserver_runs_as_an_upstream_of_its_own(user: User) -> None:
    # covers: INT-2
    import signal
    import socket
    import subprocess
    import sys

    script = user.script({"content": [{"type": "text", "text": "Hello from the fake upstream."}]})
    with socket.socket() as probe:  # a port free now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [sys.executable, "-m", "comal.testing", str(script), "--port", str(port)]
    with subprocess.Popen(args, env=user.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as fake:  # fmt: skip
        assert fake.stdout is not None
        listening = fake.stdout.readline()
        assert f"FakeServer on http://127.0.0.1:{port}: 1 scripted replies" in listening
        # The same port again: said plainly, exit 2.
        taken = subprocess.run(args, env=user.env(), capture_output=True, text=True, timeout=60)
        assert taken.returncode == 2 and "pick another --port" in taken.stderr, taken.stderr
        base = f"http://127.0.0.1:{port}"
        answered = user.comal("-p", "hi", "--model", "anthropic:claude-sonnet-4-6",
                              ANTHROPIC_BASE_URL=base, ANTHROPIC_API_KEY="fake")  # fmt: skip
        fake.send_signal(signal.SIGTERM)
        out, err = fake.communicate(timeout=60)
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip() == "Hello from the fake upstream.", answered.stdout
    assert fake.returncode == 0, err
    assert "1: POST /v1/messages" in err and "stopped: 1 requests, 0 replies left" in out
    no_script = [sys.executable, "-m", "comal.testing", str(user.base / "no.jsonl")]
    missing = subprocess.run(no_script, env=user.env(), capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "cannot read the script" in missing.stderr


def _early_breaks(shown: str, width: int) -> list[str]:
    """Lines of the help's text and of its Commands panel that end well before the width
    although their paragraph goes on: a sentence broken where the source wrapped it."""
    lines = shown.splitlines()
    found = []
    in_commands = False
    for line, after in itertools.pairwise(lines):
        if line.startswith("╭─ Commands"):
            in_commands = True
            continue
        if line.startswith("╰"):
            in_commands = False
        if in_commands:
            text, going_on = line.strip("│ ").rstrip(), after.startswith("│" + " " * 11)
        elif line.startswith(" ") and not line.lstrip().startswith(("Usage:", "│", "╭", "╰")):
            text, going_on = line.strip(), bool(after.strip()) and after.startswith(" ")
        else:
            continue
        if going_on and text and len(text) < width * 0.6:
            found.append(line)
    return found


def test_help_flows_its_sentences_and_shows_no_bool(user: User) -> None:
    # covers: OPS-1
    for args in (("--help",), ("sessions", "--help"), ("agent", "--help"), ("rm", "--help")):
        shown = user.comal(*args, COLUMNS="100")
        assert shown.returncode == 0, shown.stderr
        assert "<bool>" not in shown.stdout, (args, shown.stdout)
        assert _early_breaks(shown.stdout, 100) == [], (args, shown.stdout)


def test_show_json_names_the_entry_as_the_table_does(user: User) -> None:
    # covers: LED-1
    session = _long_session(user)
    table = user.comal("show", session[:8], COLUMNS="200").stdout
    rows = json.loads(user.comal("show", session[:8], "--json").stdout)
    header = next(line for line in table.splitlines() if "seq" in line and "role" in line)
    assert "entry" in header and "id" not in header.split(), header
    assert [set(r) & {"entry", "id"} for r in rows] == [{"entry"}], rows
    found = json.loads(user.comal("search", "--json", "parser").stdout)
    assert found[0]["entry"] == rows[0]["entry"]  # one name for one thing, on every command
