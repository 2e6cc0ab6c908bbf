"""Issue 9 §3: user-supplied patterns cannot stall Grep or EvidenceRead.

``(a+)+$`` on 41 characters took Python's backtracking engine over 20 s; on RE2 it is linear.
The probes use far longer subjects, so a backtracking engine would never finish: a hang guard
turns that into a failure instead of a stuck run. Patterns RE2 cannot run are refused with a
code, never handed to a backtracking engine.
"""

# covers: EVI-2, OPS-5

from __future__ import annotations

from pathlib import Path

import pytest

from _ops_support import Setup, make_setup
from comal.messages import Message
from comal.ops import Policy, Registry
from comal.ops._recall import recall_operations
from comal.ops._session_search import session_search_operation

from ._sec_support import Tally, attempt, finishes

CATASTROPHIC = ["(a+)+$", "(a|a)+$", "(a|aa)+$", "(.*a){20}$", "^(a+)+b"]
SUBJECT = "a" * 50_000 + "!"


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_regex_in_grep(s: Setup, pattern: str) -> None:
    (s.root / "bait.txt").write_text(SUBJECT + "\n" + "a" * 41 + "b\n")
    tally = Tally()
    out: dict[str, object] = {}
    assert finishes(lambda: out.update(o=attempt(s, tally, "Grep", {"pattern": pattern})))
    assert tally.escaped == [] and tally.statuses == {"ok": 1}


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_regex_in_evidence_read(s: Setup, pattern: str) -> None:
    (s.root / "bait.txt").write_text(SUBJECT)
    tally = Tally()
    read = attempt(s, tally, "Read", {"path": "bait.txt"})
    entry = s.ledger.heads(s.scope)[-1].id  # the Read's result, as the model would cite it
    assert read is not None and s.ledger.entry(s.scope, entry).message.tool_result is not None
    args = {"entry": entry, "search": pattern, "regex": True}
    out: dict[str, object] = {}
    assert finishes(lambda: out.update(o=attempt(s, tally, "EvidenceRead", args)))
    assert tally.escaped == [] and tally.statuses == {"ok": 2}


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=a)a", r"(?<=a)b", r"(?!a)b"])
def test_patterns_re2_cannot_run_are_refused_with_a_code(s: Setup, pattern: str) -> None:
    (s.root / "f.txt").write_text("aa ab\n")
    tally = Tally()
    grep = attempt(s, tally, "Grep", {"pattern": pattern})
    assert grep is not None and grep.receipt.observations["error"] == "REGEX_UNSUPPORTED"
    attempt(s, tally, "Read", {"path": "f.txt"})
    entry = s.ledger.heads(s.scope)[-1].id
    ev = attempt(s, tally, "EvidenceRead", {"entry": entry, "search": pattern, "regex": True})
    assert ev is not None and ev.receipt.status == "error"
    assert "RE2" in ev.result.text and "backreferences or lookaround" in ev.result.text
    assert tally.escaped == []


def test_regex_still_finds_what_it_should(s: Setup) -> None:
    (s.root / "f.py").write_text("x = 1\nTODO = 2\ntodo: later\n")
    tally = Tally()
    grep = attempt(s, tally, "Grep", {"pattern": r"^TODO\s*=", "output_mode": "content"})
    assert grep is not None and grep.result.text == "f.py:2:TODO = 2"
    icase = attempt(
        s, tally, "Grep", {"pattern": "todo", "ignore_case": True, "output_mode": "count"}
    )
    assert icase is not None and icase.result.text == "f.py:2"


def _recall_setup(tmp_path: Path) -> Setup:
    registry = Registry([*recall_operations(), session_search_operation()])
    s = make_setup(tmp_path, policy=Policy.from_config({"mode": "trusted"}), registry=registry)
    s.ledger.append(s.scope, [Message.user(SUBJECT)])
    s.ledger.append(s.scope, [Message.user("a" * 41 + "b")])
    return s


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_regex_in_the_recall_tools(tmp_path: Path, pattern: str) -> None:
    # covers: DAG-5, PIP-1
    # ctx_search (dag) and session_search (pipeline) take the model's pattern to the ledger's
    # own search: it runs on RE2 too, as does `comal search --regex`.
    s = _recall_setup(tmp_path)
    try:
        tally = Tally()
        for name, args in (
            ("ctx_search", {"query": pattern, "mode": "regex"}),
            ("session_search", {"query": pattern, "regex": True}),
        ):
            assert finishes(lambda n=name, a=args: attempt(s, tally, n, a))
        assert tally.escaped == [] and tally.statuses == {"ok": 2}
        assert finishes(lambda: s.ledger.search(s.scope, pattern, regex=True))
    finally:
        s.close()


def test_the_recall_tools_refuse_what_re2_cannot_run(tmp_path: Path) -> None:
    s = _recall_setup(tmp_path)
    try:
        tally = Tally()
        for name, args in (
            ("ctx_search", {"query": r"(a)\1", "mode": "regex"}),
            ("session_search", {"query": r"(?=a)a", "regex": True}),
        ):
            outcome = attempt(s, tally, name, args)
            assert outcome is not None and outcome.receipt.status == "error"
            assert "backreferences or lookaround" in outcome.result.text
        assert tally.escaped == []
        hits = s.ledger.search(s.scope, "a{41}b", regex=True)
        assert [h.seq for h in hits] == [1]  # still finds what it should
    finally:
        s.close()


def test_regex_search_reads_text_with_lone_surrogates(tmp_path: Path) -> None:
    # covers: LED-5
    # Stored tool output may hold lone surrogates; RE2 reads UTF-8, which cannot encode them.
    s = _recall_setup(tmp_path)
    try:
        s.ledger.append(s.scope, [Message.user("bad \udc80 byte, then needle")])
        hits = s.ledger.search(s.scope, r"byte, then ne+dle", regex=True)
        assert [h.seq for h in hits] == [2]
        recalled = s.ledger.recall_search(s.scope, r"ne+dle", mode="regex", summaries=False)
        assert [h.seq for h in recalled] == [2]
    finally:
        s.close()
