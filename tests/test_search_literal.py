"""Search reads its query as text (issue 19): ordinary strings never break it, on both backends.

``comal search "django.setup()"`` was an FTS5 syntax error, ``create-next-app`` "no such column:
next"; a bare ``AND`` or an unclosed quote failed too, and the model's ``session_search`` passed
FTS5 syntax through. By default the query is now a literal phrase (quoted for FTS5, translated
for PostgreSQL), ``--fts`` asks for the syntax, and every query's cost is bounded: word limits
before it runs, a time bound the database enforces while it runs.
"""

from __future__ import annotations

import json
import random
import string
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from _pg_support import LedgerStore, url_with_schema
from comal.cli import app
from comal.ledger import (
    MAX_PHRASE_WORDS,
    MAX_PREFIXES,
    MAX_WORDS,
    BadSearchQuery,
    LedgerBackend,
    LedgerTimeout,
    Scope,
    SearchTooBroad,
    StepInput,
)
from comal.ledger._postgres_fts import search_words
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, default_registry

# Words both backends split and fold alike (the property is about the query, not tokenizers).
_LETTERS = "abcxyzABCXYZ019éñжЖ中"
_WORDS = st.one_of(
    st.text(_LETTERS, min_size=1, max_size=6),
    st.sampled_from(["AND", "OR", "NOT", "NEAR", "next", "setup", "django", "app"]),
)
_SEPARATORS = st.text(" .-()\"*:^+,'\n\t_/\\[]{}!?@#$%&=~`|<>;\x00", min_size=1, max_size=3)
_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _phrase_in(words: list[str], text: str) -> bool:
    """Whether ``words`` occur in ``text``'s words as one run (what a literal search means)."""
    have = search_words(text)
    return any(have[i : i + len(words)] == words for i in range(len(have) - len(words) + 1))


def _session(led: LedgerBackend, texts: list[str]) -> Scope:
    scope = led.create_session("t", "a")
    led.append_steps(scope, [StepInput([Message.user(t)]) for t in texts])
    return scope


@given(
    st.lists(st.tuples(_SEPARATORS, _WORDS), min_size=1, max_size=12),
    st.data(),
)
@_SETTINGS
def test_text_searched_literally_is_found_where_it_occurs(
    any_ledger: LedgerBackend, pieces: list[tuple[str, str]], data: st.DataObject
) -> None:
    # covers: LED-5, LED-4
    text = "".join(sep + word for sep, word in pieces) + " tail"
    starts, ends, at = [], [], 0
    for sep, word in pieces:
        starts.append(at + len(sep))
        at += len(sep) + len(word)
        ends.append(at)
    i = data.draw(st.integers(0, len(pieces) - 1))
    j = data.draw(st.integers(i, len(pieces) - 1))
    # From the start of one word to the end of another, with what separates them, as written.
    query = text[starts[i] : ends[j]]
    scope = _session(any_ledger, ["an unrelated line", text, "another one"])
    assert 1 in {h.seq for h in any_ledger.search(scope, query)}, query
    assert 1 in {h.seq for h in any_ledger.recall_search(scope, query, mode="phrase")}, query
    assert 1 in {h.seq for h in any_ledger.recall_search(scope, query, mode="words")}, query


@given(st.text(st.characters(codec=None, exclude_categories=()), max_size=40))
@_SETTINGS
def test_any_string_searched_literally_finds_it_or_nothing(
    any_ledger: LedgerBackend, query: str
) -> None:
    # covers: LED-5, LED-4
    texts = ["npx create-next-app@latest", "call django.setup() now", "AND OR NOT", 'a "b c']
    scope = _session(any_ledger, texts)
    hits = any_ledger.search(scope, query)  # never raises, whatever the string holds
    wanted = search_words(query)
    for h in hits:
        assert wanted and _phrase_in(wanted, texts[h.seq]), (query, texts[h.seq])
    any_ledger.recall_search(scope, query, mode="phrase")
    any_ledger.recall_search(scope, query, mode="words")


_ORDINARY = {
    "django.setup()": "call django.setup() now",
    "create-next-app": "npx create-next-app@latest",
    "AND": "this AND that",
    'say "hello': 'he did say "hello there',
    "a:b": "key a:b here",
    "-foo": "the -foo flag",
    "NOT": "NOT a word",
}


@pytest.fixture
def cli_ledger(ledger_store: LedgerStore, tmp_path: Path) -> Iterator[str]:
    """A ledger holding each ordinary string in a session of its own, as the CLI names it."""
    led = ledger_store.open()
    try:
        for k, text in enumerate(_ORDINARY.values()):
            scope = led.create_session("t", "a", session_id=f"s{k}")
            led.append(scope, [Message.user("something else entirely")])
            led.append(scope, [Message.user(text)])
    finally:
        led.close()
    if ledger_store.backend == "sqlite":
        yield str(tmp_path / "ledger.db")
    else:
        yield url_with_schema(ledger_store.dsn, ledger_store.schema)  # type: ignore[attr-defined]


def _cli(target: str, *args: str) -> Any:
    return CliRunner().invoke(app, ["--ledger", target, "search", "--json", *args])


def test_comal_search_reads_ordinary_strings_as_text(cli_ledger: str) -> None:
    # covers: LED-5, LED-4
    for k, query in enumerate(_ORDINARY):
        result = _cli(cli_ledger, "--", query)
        assert result.exit_code == 0, (query, result.output)
        hits = json.loads(result.stdout)
        assert [(h["session"], h["seq"]) for h in hits] == [(f"s{k}", 1)], query
    # The syntax is there when asked for; what it cannot parse is a coded error, no traceback.
    result = _cli(cli_ledger, "--fts", "create-next-app")
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
    assert "SEARCH_SYNTAX" in result.output and "Traceback" not in result.output
    result = _cli(cli_ledger, "--fts", "django OR npx")
    assert {h["session"] for h in json.loads(result.stdout)} == {"s0", "s1"}


def test_comal_search_takes_a_regex_when_asked(cli_ledger: str) -> None:
    # covers: LED-5, LED-4
    # --regex as before: the pattern's own syntax, the text's punctuation as written.
    for pattern, session in ((r"django\.setup\(\)", "s0"), ("create-next-app@", "s1")):
        result = _cli(cli_ledger, "--regex", "--", pattern)
        assert result.exit_code == 0, (pattern, result.output)
        assert [h["session"] for h in json.loads(result.stdout)] == [session], pattern
    # A pattern's syntax means something only with --regex: as text, "dj.ngo" is two words.
    assert [h["session"] for h in json.loads(_cli(cli_ledger, "--regex", "dj.ngo").stdout)] == [
        "s0"
    ]
    assert json.loads(_cli(cli_ledger, "dj.ngo").stdout) == []
    # What cannot run is a coded error, never a traceback; so is asking for two readings.
    for args in (("--regex", "("), ("--regex", "--fts", "x")):
        result = _cli(cli_ledger, *args)
        assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
        assert "Traceback" not in result.output
        assert json.loads(result.stdout)["error"]["code"], result.stdout


def _recall(led: LedgerBackend, scope: Scope, name: str, args: dict[str, Any]) -> Any:
    """The model's call, through a house: judged, run and receipted."""
    tool_call = ToolCall("c1", name, json.dumps(args))
    step = led.append(scope, [Message.assistant("", tool_call)])[0].step
    house = House.of(led, scope, default_registry(), Policy(mode="trusted"))
    return house.handle(tool_call, Actor.user("ana"), join_step=step)


def test_the_models_recall_tools_read_queries_as_text(any_ledger: LedgerBackend) -> None:
    # covers: LED-5, DAG-7, PIP-1
    texts = list(_ORDINARY.values())
    for k, query in enumerate(_ORDINARY):
        for name, args in (
            ("session_search", {"query": query}),
            ("ctx_search", {"query": query, "mode": "phrase", "kind": "messages"}),
            ("ctx_search", {"query": query, "kind": "messages"}),
        ):
            scope = _session(any_ledger, texts)  # a session of its own: no earlier results
            outcome, receipt = _recall(any_ledger, scope, name, args)
            assert receipt.status == "ok", (name, query, outcome.result.text)
            hits = receipt.observations["hits"]
            if name == "session_search":
                assert [h["seq"] for h in hits] == [k], (query, outcome.result.text)
            else:
                seqs = [getattr(any_ledger.entry(scope, h["id"]), "seq", None) for h in hits]
                if args.get("mode") == "phrase":
                    assert seqs == [k], (query, outcome.result.text)
                else:  # any of its words, ranked: the text holding them all comes first
                    assert seqs[:1] == [k], (query, outcome.result.text)
    # The model has no FTS5 mode to pass syntax through.
    scope = _session(any_ledger, texts)
    outcome, receipt = _recall(any_ledger, scope, "ctx_search", {"query": "a*", "mode": "fts"})
    assert receipt.status != "ok" and outcome.result.is_error


def test_text_is_found_as_written_past_its_words_in_order(any_ledger: LedgerBackend) -> None:
    # covers: LED-5, LED-4
    # "x.y()" is the text x.y(), not the words x and y: the index finds its words in order,
    # the text then decides, and a rare text behind common words is still found, in a
    # bounded number of index reads.
    decoys = ["x y", "x, y", "ax.y()", "x.yz()", "x. y()"] * 12
    scope = _session(any_ledger, [*decoys, "call x.y() now", "X.Y()"])
    statements: list[str] = []
    with any_ledger.trace(lambda sql, _args: statements.append(sql)):
        hits = any_ledger.search(scope, "x.y()", limit=5)
    assert sorted(h.seq for h in hits) == [len(decoys), len(decoys) + 1], hits
    assert sorted(h.snippet[a:b] for h in hits for a, b in h.marks) == ["X.Y()", "x.y()"]
    ranked = [s for s in statements if "MATCH" in s or "@@" in s]
    assert 1 < len(ranked) <= 5, ranked  # batches growing fourfold up to MAX_HITS
    # White space is any white space; a word is whole at the text's ends.
    scope = _session(any_ledger, ["run  the\ttests", "rerun the tests", "run the testsuite"])
    assert [h.seq for h in any_ledger.search(scope, "run the tests")] == [0]


def test_queries_over_the_limits_are_refused_before_they_run(any_ledger: LedgerBackend) -> None:
    # covers: LED-5
    scope = _session(any_ledger, ["alpha beta gamma"])
    statements: list[str] = []
    many = " ".join(f"w{i}" for i in range(MAX_WORDS + 1))
    long_phrase = " ".join(f"p{i}" for i in range(MAX_PHRASE_WORDS + 1))
    prefixes = " OR ".join(f"{c}*" for c in string.ascii_lowercase[: MAX_PREFIXES + 1])
    with any_ledger.trace(lambda sql, _args: statements.append(sql)):
        with pytest.raises(SearchTooBroad, match="at most"):
            any_ledger.recall_search(scope, many)
        with pytest.raises(SearchTooBroad, match="at most"):
            any_ledger.search(scope, long_phrase)
        with pytest.raises(SearchTooBroad, match="prefix"):
            any_ledger.search(scope, prefixes, fts=True)
        with pytest.raises(SearchTooBroad):
            any_ledger.search(scope, " OR ".join(f"w{i}" for i in range(40)), fts=True)
    assert not [s for s in statements if "MATCH" in s or "@@" in s], statements
    with pytest.raises(BadSearchQuery):
        any_ledger.search(scope, "create-next-app", fts=True)
    assert SearchTooBroad.code == "SEARCH_TOO_BROAD" and BadSearchQuery.code == "SEARCH_SYNTAX"


_FOREVER = {
    # Statements that would not end by themselves: only the database's bound ends them.
    "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"
    " SELECT count(*) FROM c",
    "postgres": "SELECT pg_sleep(600)",
}


def test_the_database_cuts_off_a_bounded_statement(ledger_store: LedgerStore) -> None:
    # covers: LED-5, SCL-2
    led = ledger_store.open()
    try:
        scope = _session(led, ["alpha beta"])
        with pytest.raises(LedgerTimeout) as caught, led.bounded(0.2), led.atomic() as c:
            c.execute(_FOREVER[ledger_store.backend])
        assert caught.value.code == "LEDGER_TIMEOUT"
        # The bound went with the block: the connection is whole and nothing is cut short.
        assert [h.seq for h in led.search(scope, "beta")] == [0]
        with led.atomic() as c:
            c.execute("SELECT 1")
        # A thread's bound is its own: another thread on the same connection runs unbounded.
        done: list[int] = []
        entered, release = threading.Event(), threading.Event()

        def other() -> None:
            entered.wait(10)
            done.append(len(led.search(scope, "alpha")))
            release.set()

        t = threading.Thread(target=other)
        t.start()
        with led.bounded(0.0):
            entered.set()
            assert release.wait(10)
        t.join(10)
        assert done == [1]
        with led.bounded(0.0), pytest.raises(LedgerTimeout):
            led.search(scope, "alpha")
    finally:
        led.close()


@pytest.fixture
def big_session(ledger: Any) -> Iterator[tuple[Any, Scope, list[str]]]:
    rng = random.Random(5)
    vocab = [
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 8)))
        for _ in range(3000)
    ]
    scope = ledger.create_session("t", "a")
    steps = [StepInput([Message.user(" ".join(rng.sample(vocab, 60)))]) for _ in range(1000)]
    ledger.append_steps(scope, steps)
    ledger.search(scope, "warm")  # the full-text index catches up first
    yield ledger, scope, vocab


def test_a_many_word_search_runs_its_match_once(big_session: Any) -> None:
    # covers: LED-5
    # Counted in SQLite's virtual-machine steps (its progress handler, every 1,000), not in
    # time. Handed the session's ids as "rowid IN (...)", FTS5 ran the whole 32-word MATCH once
    # per entry: 1,135 thousand steps here (8 s for 150 words over 2,000 entries); as one
    # ranged scan it takes 32.
    led, scope, vocab = big_session
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    led._db.raw.set_progress_handler(count, 1000)
    try:
        hits = led.recall_search(scope, " ".join(vocab[:MAX_WORDS]), summaries=False)
    finally:
        led._db.raw.set_progress_handler(None, 0)
    assert len(hits) == 10
    assert steps[0] < 200, steps[0]
