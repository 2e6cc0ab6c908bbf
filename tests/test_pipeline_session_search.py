"""``session_search``: the pipeline's recall operation over the raw session, through the house."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from _context_sessions import read_all
from _ops_support import Setup, call, make_setup, propose
from comal.agent._catalog import model_catalog
from comal.context import get_engine
from comal.evidence import parse_evidence_call
from comal.messages import Message

_CALL = re.compile(r"EvidenceRead\([^\n]*\)")


@pytest.fixture
def s(tmp_path: Path) -> Iterator[Setup]:
    setup = make_setup(tmp_path)
    yield setup
    setup.close()


def _seed(s: Setup) -> None:
    s.ledger.append(s.scope, [Message.user("please fix the tokenizer in lexer.py")])
    s.ledger.append(
        s.scope,
        [
            Message.assistant("", *[call("Bash", {"command": "pytest"}, "t1")]),
            Message.tool("t1", "FAILED test_lexer.py::test_unicode - KeyError: 'é'\n" * 3),
        ],
    )


def _follow(s: Setup, text: str) -> list[str]:
    out = []
    for found in _CALL.findall(text):
        args = parse_evidence_call(found)
        assert args.expected_digest is not None
        out.append(read_all(s.ledger, s.scope, args.entry, args.field, args.expected_digest))  # type: ignore[arg-type]
    return out


def test_session_search_finds_raw_history_with_exact_recovery_calls(s: Setup) -> None:
    # covers: PIP-1, LED-5, EVI-1, OPS-3
    _seed(s)
    outcome, receipt = propose(s, call("session_search", {"query": "KeyError"}))
    assert receipt.status == "ok", outcome.result.text
    text = outcome.result.text
    # The stored output; not the message proposing this search (it names the words too).
    assert "1 hit(s)" in text and "- seq 2, entry 3, tool: FAILED" in text
    (whole,) = _follow(s, text)
    assert whole == "FAILED test_lexer.py::test_unicode - KeyError: 'é'\n" * 3
    # An earlier search (its call and its result) is history like any other.
    outcome, _ = propose(s, call("session_search", {"query": "KeyError"}))
    assert "3 hit(s)" in outcome.result.text
    # The request too, by regex; its text field comes back exactly.
    outcome, receipt = propose(s, call("session_search", {"query": r"tokeni[sz]er", "regex": True}))
    assert receipt.status == "ok"
    assert _follow(s, outcome.result.text) == ["please fix the tokenizer in lexer.py"]
    assert receipt.operation == "session_search"


def test_session_search_reads_a_broken_query_as_a_phrase_and_reports_bad_patterns(
    s: Setup,
) -> None:
    # covers: LED-5
    _seed(s)
    outcome, receipt = propose(s, call("session_search", {"query": 'lexer.py"'}))
    assert receipt.status == "ok", outcome.result.text
    outcome, receipt = propose(s, call("session_search", {"query": "(", "regex": True}))
    assert receipt.status == "error" and "bad regular expression" in outcome.result.text
    outcome, receipt = propose(s, call("session_search", {"query": "nothing-like-this-here"}))
    assert receipt.status == "ok" and "0 hit(s)" in outcome.result.text


def test_session_search_stays_in_its_own_session(s: Setup) -> None:
    # covers: LED-2
    _seed(s)
    other = s.ledger.create_session("t", "a")
    s.ledger.append(other, [Message.user("a secret about KeyError elsewhere")])
    outcome, _ = propose(s, call("session_search", {"query": "secret"}))
    assert "0 hit(s)" in outcome.result.text


def test_session_search_is_offered_only_under_the_pipeline(s: Setup) -> None:
    # covers: PIP-1
    catalog = s.house.catalog("model")
    assert "session_search" in catalog.names
    assert "session_search" in model_catalog(catalog, get_engine("pipeline")).names
    assert "session_search" not in model_catalog(catalog, get_engine("limit")).names
