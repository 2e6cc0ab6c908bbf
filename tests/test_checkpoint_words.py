"""What a checkpoint says of the work (LIM-3): the user's requests in the user's words (never the
``<context>`` preamble comal puts before a prompt), and the lines of an error that say what
went wrong (the ``AssertionError: 1.5`` at the end of a traceback, not its first line)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from _agent_support import settings_for
from comal.agent import Preamble
from comal.agent._agent import intention
from comal.cli import app
from comal.ledger import open_ledger
from comal.messages import Message, ToolCall

# covers: LIM-3, LIM-7, CCH-1

runner = CliRunner()
PROMPT = "Fix calc.py so that check.py passes."
FAILED = (
    "[stderr]\n"
    "Traceback (most recent call last):\n"
    '  File "/work/project/check.py", line 3, in <module>\n'
    "    assert mean([1, 2]) == 1.5, mean([1, 2])\n"
    "           ^^^^^^^^^^^^^^^^^^^\n"
    "AssertionError: 1.0\n"
    "[exit code 1]"
)


def _session(tmp_path: Path, prompt: str = PROMPT) -> Path:
    db = tmp_path / "w.db"
    settings = settings_for(preamble=True)
    when = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    first = intention(prompt, settings, preamble=Preamble(when, "/work/project", "ana"))
    with open_ledger(db) as led:
        scope = led.create_session("t", "a", session_id="sess-w", messages=[first])
        bash = ToolCall("c1", "Bash", json.dumps({"command": "python check.py"}))
        led.append(scope, [Message.assistant("", bash), Message.tool("c1", FAILED, is_error=True)])
        read = ToolCall("c2", "Read", json.dumps({"path": "calc.py"}))
        led.append(scope, [Message.assistant("", read), Message.tool("c2", "def mean(v): ...")])
    return db


def _state(db: Path) -> tuple[dict[str, Any], str]:
    as_json = runner.invoke(app, ["--ledger", str(db), "state", "sess-w", "--json"])
    assert as_json.exit_code == 0, as_json.output
    text = runner.invoke(app, ["--ledger", str(db), "state", "sess-w"])
    assert text.exit_code == 0, text.output
    return json.loads(as_json.stdout), text.stdout


def test_the_user_request_is_the_users_words(tmp_path: Path) -> None:
    state, text = _state(_session(tmp_path))
    (request,) = state["requests"]
    assert request["text"] == PROMPT
    assert "<context>" not in text and "workspace: /work/project" not in text
    assert PROMPT in text


def test_a_long_request_is_read_back_from_where_the_words_start(tmp_path: Path) -> None:
    from comal.evidence import parse_evidence_call, read_evidence

    long = "Refactor the parser. " * 400
    db = _session(tmp_path, long)
    state, text = _state(db)
    (request,) = state["requests"]
    assert request["text"] == long[: len(request["text"])] and "<context>" not in text
    call = text.split("[read it exactly: ", 1)[1].split("]", 1)[0].replace("\n", "")
    args = parse_evidence_call(call)
    with open_ledger(db) as led:
        page = read_evidence(led, led.resolve("sess-w"), args.entry, field=args.field,
                             offset=args.offset, expected_digest=args.expected_digest)  # fmt: skip
    assert page.text.startswith("Refactor the parser.")


def test_the_last_errors_keep_the_lines_that_say_what_failed(tmp_path: Path) -> None:
    state, text = _state(_session(tmp_path))
    (error,) = state["errors"]
    shown = " ".join(error["excerpt"])
    assert "AssertionError: 1.0" in shown and "Traceback" in shown
    assert "[stderr]" not in shown and len(error["excerpt"]) <= 4
    section = text.split("Last errors", 1)[1].split("\n\n", 1)[0]
    assert "AssertionError: 1.0" in section


def test_error_excerpts_stay_bounded() -> None:
    from comal.context import error_excerpt

    noisy = "\n".join(f"ERROR: thing {i} failed " + "x" * 500 for i in range(200))
    lines = error_excerpt(noisy)
    assert 0 < len(lines) <= 4 and all(len(line) <= 200 for line in lines)
    assert sum(len(line) for line in lines) <= 600
    assert error_excerpt("just one line") == ["just one line"]
    assert error_excerpt("\n\n") == []


def test_the_pipeline_quotes_the_request_in_the_users_words(tmp_path: Path) -> None:
    # covers: PIP-1
    from comal.context.pipeline._summary import quote_request
    from comal.evidence import parse_evidence_call, read_evidence

    db = _session(tmp_path, "Refactor the parser. " * 40)
    with open_ledger(db) as led:
        scope = led.resolve("sess-w")
        first = led.entries(scope)[0]
        quote = quote_request(first, 100)
        assert quote.text.startswith("Refactor the parser.") and "<context>" not in quote.text
        call = parse_evidence_call(quote.text.split("[the rest: ", 1)[1].rstrip("]"))
        rest = read_evidence(led, scope, call.entry, field=call.field, offset=call.offset,
                             expected_digest=call.expected_digest)  # fmt: skip
    assert rest.text.startswith(("Refactor the parser. " * 40)[100:120])
