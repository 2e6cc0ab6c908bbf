"""EvidenceRead: exact UTF-16 paging, search, digests and session scoping (EVI-1..4)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import comal.evidence as evidence
from comal.errors import LedgerIntegrityError, ScopeError, UserError
from comal.evidence import (
    MAX_PAGE_UNITS,
    EvidenceArgumentError,
    EvidenceCorrupt,
    EvidenceDigestMismatch,
    EvidenceFieldError,
    EvidenceNotAllowed,
    EvidenceNotFound,
    EvidencePage,
    EvidenceReadArgs,
    evidence_call,
    parse_evidence_call,
    read_evidence,
    read_with_args,
    utf16_len,
)
from comal.ledger import Entry, Scope, SessionInfo, SQLiteLedger, open_ledger
from comal.messages import EvidenceRef, Message, Text, ToolCall, sha256_hex
from comal.messages.wire import evidence_read_call
from comal.tokens import EstimatingCounter

EMOJI_CRLF = "héllo 😀\r\nwörld 🧪🧪\r\n" * 700 + "end 🏁"


def _js_units(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@pytest.fixture
def led(tmp_path: Path) -> Iterator[SQLiteLedger]:
    ledger = open_ledger(tmp_path / "evidence.db", counter=EstimatingCounter())
    yield ledger
    ledger.close()


def _store(led: SQLiteLedger, scope: Scope, output: str | tuple[Text, ...]) -> Entry:
    call = ToolCall("c1", "Bash", json.dumps({"command": "cat log 😀"}))
    entries = led.append(scope, [Message.assistant("run", call), Message.tool("c1", output)])
    return entries[1]


def _pages(led: SQLiteLedger, scope: Scope, entry_id: int, limit: int) -> list[EvidencePage]:
    page = read_evidence(led, scope, entry_id, limit=limit)
    pages = [page]
    while page.next_call is not None:
        args = parse_evidence_call(page.next_call)
        page = read_evidence(led, scope, args.entry, offset=args.offset, limit=limit)
        pages.append(page)
    return pages


def test_pages_reassemble_exactly_with_emoji_and_crlf(led: SQLiteLedger) -> None:
    # covers: EVI-1, EVI-2, EVI-4
    scope = led.create_session("t", "a")
    entry = _store(led, scope, EMOJI_CRLF)
    pages = _pages(led, scope, entry.id, MAX_PAGE_UNITS)
    joined = "".join(p.text for p in pages)
    assert joined == EMOJI_CRLF and sha256_hex(joined) == entry.output_digest
    assert joined.encode() == EMOJI_CRLF.encode()  # byte for byte
    total = _js_units(EMOJI_CRLF)
    assert all(p.total_utf16 == total and p.digest == entry.output_digest for p in pages)
    for before, after in itertools.pairwise(pages):
        assert before.end == after.offset
    before_page = ""
    for p in pages:
        assert p.end - p.offset == _js_units(p.text) <= MAX_PAGE_UNITS
        # The page's offsets are exact: the text before it has exactly ``offset`` units.
        assert p.offset == _js_units(before_page)
        before_page += p.text
        assert (
            EMOJI_CRLF.encode("utf-16-le")[2 * p.offset : 2 * p.end].decode("utf-16-le") == p.text
        )
    assert pages[-1].next_call is None and pages[-1].end == total


@settings(max_examples=60, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(["a", "é", "😀", "🧪", "\r\n", "\n", "中", " ", "\U0010ffff"]),
        max_size=300,
    ).map("".join),
    limit=st.integers(1, 40),
    offset=st.integers(0, 700),
)
def test_any_page_is_a_valid_exact_slice(text: str, limit: int, offset: int) -> None:
    # covers: EVI-2, EVI-4
    ledger = open_ledger(":memory:", counter=EstimatingCounter())
    scope = ledger.create_session("t", "a")
    entry = _store(ledger, scope, text)
    total = _js_units(text)
    if offset > total:
        with pytest.raises(EvidenceArgumentError):
            read_evidence(ledger, scope, entry.id, offset=offset, limit=limit)
        return
    pages = [read_evidence(ledger, scope, entry.id, offset=offset, limit=limit)]
    while pages[-1].next_call is not None:
        args = parse_evidence_call(pages[-1].next_call)
        pages.append(read_evidence(ledger, scope, entry.id, offset=args.offset, limit=limit))
    start = pages[0].offset
    assert start in (offset, offset - 1)  # moved back only to the start of a surrogate pair
    data = text.encode("utf-16-le", "surrogatepass")
    assert "".join(p.text for p in pages) == data[2 * start :].decode("utf-16-le", "surrogatepass")
    for p in pages:
        assert p.end - p.offset == _js_units(p.text)
        # A page never exceeds the limit, except a 1-unit page on an astral character.
        assert p.end - p.offset <= max(limit, 2)
        assert p.end > p.offset or p.end == total
    ledger.close()


def test_search_returns_utf16_offsets_and_the_page_around_the_first_match(
    led: SQLiteLedger,
) -> None:
    # covers: EVI-2
    scope = led.create_session("t", "a")
    text = "😀" * 1000 + "needle" + "x" * 20_000 + "needle 🧪 needle"
    entry = _store(led, scope, text)
    page = read_evidence(led, scope, entry.id, search="needle")
    first = _js_units("😀" * 1000)
    assert page.matches[0] == first == 2000
    second = _js_units(text[: text.index("needle", 1010)])
    assert page.matches == (first, second, second + _js_units("needle 🧪 "))
    assert page.offset <= first < page.end and page.offset >= first - 200
    assert "needle" in page.text
    later = read_evidence(led, scope, entry.id, search="needle", offset=first + 1)
    assert later.offset <= second < later.end and later.matches == page.matches
    regex = read_evidence(led, scope, entry.id, search=r"needle\s🧪", regex=True)
    assert regex.matches == (second,)
    missing = read_evidence(led, scope, entry.id, search="absent")
    assert missing.text == "" and missing.matches == () and missing.next_call is None
    with pytest.raises(EvidenceArgumentError, match="regular expression"):
        read_evidence(led, scope, entry.id, search="(", regex=True)


def test_rendered_page_names_its_range_and_the_next_call(led: SQLiteLedger) -> None:
    # covers: EVI-2
    scope = led.create_session("t", "a")
    entry = _store(led, scope, "ab😀" * 3_000)
    page = read_evidence(led, scope, entry.id, search="b😀")
    shown = page.render()
    assert shown.startswith(f"[EvidenceRead entry {entry.id}, field 'content': UTF-16 units 0..")
    assert "3000 matches at 1, 5, 9" in shown and "(+2950 more)" in shown
    assert page.next_call is not None and shown.endswith(f"[next page: {page.next_call}]")
    last = read_evidence(led, scope, entry.id, offset=page.total_utf16 - 4)
    assert last.render().endswith("ab😀\n[end of the stored text]")


def test_expected_digest_mismatch_reads_nothing(led: SQLiteLedger) -> None:
    # covers: EVI-3
    scope = led.create_session("t", "a")
    entry = _store(led, scope, "secret output")
    assert entry.output_digest is not None
    ok = read_evidence(led, scope, entry.id, expected_digest=entry.output_digest)
    assert ok.text == "secret output"
    with pytest.raises(EvidenceDigestMismatch) as info:
        read_evidence(led, scope, entry.id, expected_digest="0" * 64)
    assert isinstance(info.value, LedgerIntegrityError)
    assert info.value.code == "EVIDENCE_DIGEST_MISMATCH"
    assert "secret" not in str(info.value)


def test_only_own_and_direct_children_sessions(led: SQLiteLedger) -> None:
    # covers: EVI-3, LED-2
    parent = led.create_session("t", "a")
    child = led.create_session("t", "sub", parent=parent.session)
    grandchild = led.create_session("t", "sub2", parent=child.session)
    stranger = led.create_session("t", "a")
    other_tenant = led.create_session("u", "a")
    own, kid = _store(led, parent, "own"), _store(led, child, "kid 😀")
    deep, far = _store(led, grandchild, "deep"), _store(led, stranger, "far")
    foreign = _store(led, other_tenant, "foreign")
    assert read_evidence(led, parent, own.id).text == "own"
    page = read_evidence(led, parent, kid.id)
    assert page.text == "kid 😀" and page.session == child.session
    assert read_evidence(led, parent, kid.id, session=child.session).text == "kid 😀"
    for entry_id in (deep.id, far.id, foreign.id):
        with pytest.raises(EvidenceNotFound):
            read_evidence(led, parent, entry_id)
    for session in (grandchild.session, stranger.session, other_tenant.session):
        with pytest.raises(EvidenceNotAllowed) as info:
            read_evidence(led, parent, far.id, session=session)
        assert isinstance(info.value, ScopeError)
    # A child cannot read its parent; allowed_sessions narrows, never widens.
    with pytest.raises(EvidenceNotFound):
        read_evidence(led, child, own.id)
    with pytest.raises(EvidenceNotFound):
        read_evidence(led, parent, kid.id, allowed_sessions=[parent.session])
    with pytest.raises(EvidenceNotFound):
        read_evidence(led, parent, far.id, allowed_sessions=[stranger.session, parent.session])


def test_next_call_names_the_child_session(led: SQLiteLedger) -> None:
    # covers: EVI-2, EVI-3
    parent = led.create_session("t", "a")
    child = led.create_session("t", "sub", parent=parent.session)
    kid = _store(led, child, "z" * 9_000)
    page = read_evidence(led, parent, kid.id)
    assert page.next_call is not None
    args = parse_evidence_call(page.next_call)
    assert args.session == child.session and args.offset == MAX_PAGE_UNITS
    rest = read_with_args(led, parent, args)
    assert page.text + rest.text == "z" * 9_000 and rest.next_call is None


def test_fields_text_and_arguments(led: SQLiteLedger) -> None:
    # covers: EVI-1
    scope = led.create_session("t", "a")
    calls = (ToolCall("a", "Read", '{"path": "x 😀"}'), ToolCall("b", "Bash", '{"cmd": "ls"}'))
    user, step = (
        led.append(scope, [Message.user("do it\r\nnow")]),
        led.append(scope, [Message.assistant("thinking", *calls)]),
    )
    assert read_evidence(led, scope, user[0].id, field="text").text == "do it\r\nnow"
    assert read_evidence(led, scope, step[0].id, field="text").text == "thinking"
    assert read_evidence(led, scope, step[0].id, field="arguments[1]").text == '{"cmd": "ls"}'
    with pytest.raises(EvidenceFieldError, match=r"arguments\[0\]"):
        read_evidence(led, scope, step[0].id, field="arguments")
    with pytest.raises(EvidenceFieldError, match="'text'"):
        read_evidence(led, scope, user[0].id, field="content")
    single = led.append(scope, [Message.assistant("", calls[0])])[0]
    assert read_evidence(led, scope, single.id, field="arguments").text == '{"path": "x 😀"}'
    tool = _store(led, scope, (Text("one"), Text("two 😀")))
    assert read_evidence(led, scope, tool.id, field="output").text == "one\ntwo 😀"


def test_bad_arguments_are_typed_user_errors(led: SQLiteLedger) -> None:
    # covers: EVI-2
    scope = led.create_session("t", "a")
    entry = _store(led, scope, "a😀b")
    with pytest.raises(EvidenceArgumentError):
        read_evidence(led, scope, entry.id, offset=-1)
    with pytest.raises(EvidenceArgumentError):
        read_evidence(led, scope, entry.id, limit=0)
    with pytest.raises(EvidenceArgumentError, match="past the end"):
        read_evidence(led, scope, entry.id, offset=5)
    inside = read_evidence(led, scope, entry.id, offset=2, limit=1)
    assert (inside.offset, inside.end, inside.text) == (1, 3, "😀")
    big = read_evidence(led, scope, entry.id, limit=10**9)
    assert big.text == "a😀b"
    with pytest.raises(EvidenceNotFound):
        read_evidence(led, scope, 10**6)
    for error in (EvidenceArgumentError, EvidenceFieldError, EvidenceNotFound):
        assert issubclass(error, UserError)


def test_corrupt_stored_output_is_detected() -> None:
    # covers: EVI-4, LED-6
    scope = Scope("t", "a", "s")
    message = Message.tool("c", "real bytes")

    class Fake:
        def entry(self, scope: Scope, entry_id: int) -> Entry | None:
            return Entry(7, "s", 1, 0, "tool", 3, 10, "now", "d", "0" * 64, message)

        def children(self, scope: Scope) -> list[SessionInfo]:
            return []

    with pytest.raises(EvidenceCorrupt):
        read_evidence(Fake(), scope, 7)


def test_call_text_round_trips_and_extends_the_wire_call() -> None:
    # covers: EVI-2, LED-6
    digest = "ab" * 32
    call = evidence_call(12, "content", digest, session="kid", offset=8000, search='a "q"')
    ref = EvidenceRef(12, "content", digest, 0, 0, "", "kid")
    assert evidence_call(12, "content", digest, session="kid") == evidence_read_call(ref)
    assert call.startswith(evidence_read_call(ref)[:-1] + ", offset=8000")
    args = parse_evidence_call(call)
    assert (args.entry, args.field, args.expected_digest, args.session) == (
        12,
        "content",
        digest,
        "kid",
    )
    assert (args.offset, args.search, args.regex) == (8000, 'a "q"', False)
    assert parse_evidence_call('EvidenceRead(entry=3, regex=true, search="x")').regex is True
    for bad in ("Read(entry=1)", "EvidenceRead(entry=1, field=content)", "EvidenceRead(entry=0)"):
        with pytest.raises(EvidenceArgumentError):
            parse_evidence_call(bad)


def test_operation_schema() -> None:
    # covers: EVI-2, OPS-1
    schema = EvidenceReadArgs.model_json_schema()
    assert schema["title"] == "EvidenceRead"
    assert schema["required"] == ["entry"] and schema["additionalProperties"] is False
    assert set(schema["properties"]) == {
        "entry",
        "field",
        "offset",
        "limit",
        "search",
        "regex",
        "expected_digest",
        "session",
    }
    assert schema["properties"]["limit"]["maximum"] == MAX_PAGE_UNITS
    with pytest.raises(ValueError):
        EvidenceReadArgs(entry=1, limit=8_001)
    with pytest.raises(ValueError):
        EvidenceReadArgs(entry=1, expected_digest="xyz")


def test_exports() -> None:
    assert len(set(evidence.__all__)) == len(evidence.__all__)
    for name in evidence.__all__:
        assert hasattr(evidence, name)
    assert utf16_len("a😀") == 3
