"""``comal sessions`` (issue 19, item 12): newest first, a page at a time with a hint for the
rest, titles rather than file paths, one line a session at 80 columns, and imported sessions
dated by their transcripts. The page is one bounded query on both backends."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from typer.testing import CliRunner

from comal.cli import app
from comal.errors import UserError
from comal.ledger import LedgerBackend, open_ledger

runner = CliRunner()
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def _at(hours: int) -> str:
    return (START + timedelta(hours=hours)).isoformat()


def _fill(led: LedgerBackend, n: int) -> list[str]:
    """n sessions started an hour apart, written out of order; their ids newest first."""
    made = {}
    for i in [*range(1, n, 2), *range(0, n, 2)]:
        title = f"task {i:02d}: " + "make the flaky parser test pass again " * 3
        status = "active" if i == 3 else "finished"
        made[i] = led.create_session(
            "local", "comal", title=title, created_at=_at(i), status=status
        ).session
    return [made[i] for i in reversed(range(n))]


def test_a_page_is_newest_first_counts_the_rest_and_reads_only_its_rows(
    any_ledger: LedgerBackend,
) -> None:
    # covers: LED-3, LED-4
    newest_first = _fill(any_ledger, 7)
    other = any_ledger.create_session("acme", "comal", created_at=_at(100)).session
    page = any_ledger.session_page(limit=3)
    assert [s.id for s in page.sessions] == [other, *newest_first[:2]]
    assert (page.total, page.remaining) == (8, 5)
    last = any_ledger.session_page(limit=3, offset=6)
    assert [s.id for s in last.sessions] == newest_first[5:] and last.remaining == 0
    assert [s.id for s in any_ledger.session_page(tenant="local").sessions] == newest_first
    since = any_ledger.session_page(tenant="local", since=_at(5))
    assert [s.id for s in since.sessions] == newest_first[:2] and since.total == 2
    statements: list[str] = []
    with any_ledger.trace(lambda sql, _args: statements.append(sql)):
        any_ledger.session_page(limit=2, offset=1)
    # One count and one page: no statement reads every session's row.
    assert len(statements) == 2, statements
    assert "COUNT(*)" in statements[0] and "LIMIT 2 OFFSET 1" in statements[1]
    for bad in ({"limit": -1}, {"offset": -2}, {"since": "last tuesday"}):
        with pytest.raises(UserError):
            any_ledger.session_page(**bad)


@settings(max_examples=25, deadline=None)
@given(limit=st.integers(1, 12))
def test_pages_partition_the_listing(tmp_path_factory: pytest.TempPathFactory, limit: int) -> None:
    # covers: LED-3
    path = tmp_path_factory.getbasetemp() / "partition.db"
    with open_ledger(path) as led:
        expected = [s.id for s in led.session_page().sessions] or _fill(led, 11)
        pages, offset = [], 0
        while True:
            page = led.session_page(limit=limit, offset=offset)
            assert page.total == len(expected)
            if not page.sessions:
                break
            pages += [s.id for s in page.sessions]
            offset += limit
    assert pages == expected


def _ledger_with(tmp_path: Path, n: int) -> tuple[Path, list[str]]:
    db = tmp_path / "l.db"
    with open_ledger(db) as led:
        ids = _fill(led, n)
        parent = led.session_page(limit=1).sessions[0]
        kid = led.create_session(
            "local", "subagent", parent=parent.id, title="step one", created_at=_at(n + 1)
        ).session
        led.create_session(
            "local",
            "codex",
            source="/home/someone/.codex/sessions/2024/03/rollout-with-a-long-name.jsonl",
            created_at=_at(-5),
            status="finished",
        )
    return db, [kid, *ids]


def _sessions(db: Path, *args: str, columns: int = 80) -> Any:
    return runner.invoke(
        app, ["--ledger", str(db), "sessions", *args], env={"COLUMNS": str(columns)}
    )


def test_at_80_columns_each_session_is_one_line_with_its_title(tmp_path: Path) -> None:
    # covers: LED-3
    db, newest_first = _ledger_with(tmp_path, 25)
    shown = _sessions(db)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.rstrip("\n").split("\n")
    assert all(cell_len(line) <= 80 for line in lines), lines
    rows = [line for line in lines if line[:10].strip(" └")[:8] in {i[:8] for i in newest_first}]
    assert len(rows) == 20  # the default page
    # Newest first, the step under its parent, each row starting with its id prefix.
    ids = [line.strip().removeprefix("└ ")[:8] for line in rows]
    assert ids == [newest_first[1][:8], newest_first[0][:8], *(i[:8] for i in newest_first[2:20])]
    assert "└ " + newest_first[0][:8] in rows[1]
    assert "task 24: make the flaky" in rows[0] and rows[0].endswith("…")
    assert (
        lines[-1] == "7 more — --page 2 for the next 7, --limit N for N a page, --all for every one"
    )
    last = _sessions(db, "--page", "2").stdout
    assert "(rollout-with-a-long-name.jsonl)" in last and "/home/someone" not in last
    assert "more —" not in last
    # Only a status other than finished is said; stored "active" with no process holding it
    # and nothing mid-way is idle (active is said only while a live process holds it).
    assert "(idle) task 03: make" in last


def test_a_wide_terminal_shows_every_column_and_whole_ids(tmp_path: Path) -> None:
    # covers: LED-3
    db, newest_first = _ledger_with(tmp_path, 3)
    shown = _sessions(db, columns=160).stdout
    lines = shown.rstrip("\n").split("\n")
    assert lines[0].split() == [
        "session", "started", "(UTC)", "tenant/agent", "entries", "saved", "tokens", "status",
        "title",
    ]  # fmt: skip
    assert all(cell_len(line) <= 160 for line in lines)
    assert all(sid in shown for sid in newest_first)
    assert "2024-03-01 11:00" in shown and "local/comal" in shown


def test_limit_page_since_and_all(tmp_path: Path) -> None:
    # covers: LED-3
    db, newest_first = _ledger_with(tmp_path, 25)

    def listed(*args: str) -> list[str]:
        done = _sessions(db, *args, "--json")
        assert done.exit_code == 0, done.output
        return [s["session"] for s in json.loads(done.stdout)]

    by_time = listed("--all")
    assert by_time == newest_first + by_time[-1:] and len(by_time) == 27
    assert listed("--limit", "5", "--page", "3") == by_time[10:15]
    assert listed("--page", "2") == by_time[20:]
    # 2024-03-02 00:00 UTC is hour 15: hours 15..24 and the step at 26.
    assert listed("--since", "2024-03-02") == by_time[:11]
    assert listed("--since", "2024-03-02T00:00:00+00:00", "--limit", "2") == by_time[:2]
    assert listed("--since", "2024-03-02T01:00+01:00") == by_time[:11]
    assert listed("--since", "7d") == []  # every session here started in 2024
    hint = _sessions(db, "--json")
    assert [s["session"] for s in json.loads(hint.stdout)] == by_time[:20]
    assert "7 more — --page 2" in hint.stderr
    past = _sessions(db, "--page", "9")
    assert "page 9 is past the last (2); 27 session(s) in all" in past.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--since", "yesterday"), "--since 'yesterday' is neither a date nor an age"),
        (("--all", "--limit", "3"), "--all lists every session; --limit pages them"),
        (("--all", "--page", "2"), "--page pages them"),
    ],
)
def test_options_that_name_no_page_are_coded_errors(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    # covers: LED-3
    db, _ = _ledger_with(tmp_path, 1)
    text = _sessions(db, *args, columns=200)
    assert text.exit_code == 2 and "SESSIONS_OPTION" in text.output and said in text.output
    done = _sessions(db, *args, "--json")
    assert done.exit_code == 2 and json.loads(done.stdout)["error"]["code"] == "SESSIONS_OPTION"
    assert "Traceback" not in text.output + done.output


@given(text=st.text(max_size=40) | st.from_regex(r"\d{1,7}[mhdwMHDW]", fullmatch=True))
def test_since_is_a_time_or_a_coded_error(text: str) -> None:
    # covers: LED-3
    from comal.cli._listing import ListingError, parse_since

    now = datetime(2026, 1, 1, tzinfo=UTC)
    try:
        when = datetime.fromisoformat(parse_since(text, now))
    except ListingError as exc:
        assert exc.code == "SESSIONS_OPTION" and repr(text) in str(exc)
    else:
        assert when.tzinfo is not None  # compared with stored UTC times, never naive
        if text.strip()[-1:].lower() in ("m", "h", "d", "w"):
            assert when <= now  # an age counts back from now


def test_a_proxy_session_is_titled_by_what_its_user_asked(ledger: Any) -> None:
    # covers: LED-3
    from comal.messages import Message, Role, Text
    from comal.serve._sessions import SessionRouter

    asked = Message(
        Role.USER,
        (
            Text("<system-reminder>\nAs you answer, use the tools.\n</system-reminder>"),
            Text("Why does   the nightly build fail?\nIt passed yesterday."),
        ),
    )
    routed = SessionRouter(ledger).route("local", "claude-code", "k", [asked], {})
    shown = ledger.session_page().sessions
    assert [(s.id, s.title, s.source) for s in shown] == [
        (routed.scope.session, "Why does the nightly build fail?", "proxy")
    ]
