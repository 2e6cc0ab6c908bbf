"""A fast token estimate without a tokenizer, calibrated per kind of content.

"Characters / 4" is wrong in both directions on agent transcripts: JSON, identifiers and
base64 blobs cost more tokens per character than English, indented code and English prose
fewer, and non-Latin scripts cost about one token per character (0.5 for Cyrillic, 1.3 for
Hebrew). The estimator

1. cuts the text into pieces of :data:`SPAN` characters, so a tool output that mixes a log, a
   JSON dump and a base64 blob is priced piece by piece (the fit itself was made on
   :data:`CHUNK`-character pieces; the counts are additive, so only the kind guess is coarser);
2. classifies each piece (:func:`classify`, which on longer text looks only at three 1 KiB
   windows, so it costs the same for any length);
3. prices the piece as a weighted sum of seven character counts (:data:`FEATURES`), every one
   taken by a C-level ``bytes.count`` or ``bytes.translate`` pass, with the weights of its kind.

The weights are least-squares fits against cl100k token counts, made by
``bench/counter_accuracy.py --fit`` on every distinct string of 200+ characters in the shared
agent-transcript corpus, plus built-in multilingual samples for NON_LATIN (the corpus has none).
``docs/counters.md`` has the accuracy table and how it was produced.
"""

from __future__ import annotations

import string
from enum import StrEnum

__all__ = [
    "CHUNK",
    "COEFFICIENTS",
    "FEATURES",
    "ContentKind",
    "EstimatingCounter",
    "Features",
    "classify",
    "estimate_features",
    "features",
]


class ContentKind(StrEnum):
    PROSE = "prose"
    CODE = "code"
    JSON = "json"
    NON_LATIN = "non_latin"
    ENCODED = "encoded"  # base64, hex, keys and other high-entropy runs without spaces


FEATURES: tuple[str, ...] = (
    "ascii_chars",
    "spaces",
    "newlines",
    "space_pairs",  # non-overlapping "  ": indentation runs merge into few tokens
    "punctuation",
    "digits",
    # UTF-8 bytes of non-ASCII characters, so CJK (3 bytes each) costs more than Cyrillic (2).
    "non_ascii_bytes",
)

Features = tuple[int, int, int, int, int, int, int]

# Tokens per unit of each feature, in FEATURES order. Produced by
# `.venv/bin/python bench/counter_accuracy.py --fit` against cl100k; refit after changing
# classify() or FEATURES, and paste the printed table here.
COEFFICIENTS: dict[ContentKind, tuple[float, ...]] = {
    ContentKind.PROSE: (0.0909, 0.5434, 0.5272, -1.2018, 0.7495, 0.7154, 0.308),
    ContentKind.CODE: (0.2015, 0.174, 0.0, -0.6194, 0.2402, 0.827, 0.308),
    ContentKind.JSON: (0.132, 0.3276, 0.1328, -0.7615, 0.6194, 0.6403, 0.308),
    ContentKind.NON_LATIN: (0.3822, 0.0, 0.0, 0.0, 0.0, 0.0, 0.308),
    ContentKind.ENCODED: (0.6904, 0.0, 0.0, 0.0, 0.0, 0.0402, 0.308),
}

CHUNK = 2048
# Pricing span: one classification (of a 3 KiB sample) per this many characters.
SPAN = 16_384
# Below this many characters the estimate is a byte ratio (see EstimatingCounter.count).
SHORT = 48
_WINDOW = 1024

_PUNCTUATION = string.punctuation.encode()
_DIGITS = string.digits.encode()
_UPPER = string.ascii_uppercase.encode()
_LETTERS = string.ascii_letters.encode()
_HEX = (string.hexdigits + "x").encode()
_BASE64 = (string.ascii_letters + string.digits + "+/=_-").encode()
# Symbols that are rare in prose but everywhere in code; "-", ".", ",", ":" are common in both.
_CODE_SYMBOLS = b"{}()[];=<>_/\\|&*#$+%@^~`"


def _ascii(text: str) -> bytes:
    return text.encode("ascii") if text.isascii() else text.encode("ascii", "ignore")


def _occurrences(raw: bytes, alphabet: bytes) -> int:
    return len(raw) - len(raw.translate(None, alphabet))


def features(text: str) -> Features:
    """The seven counts the estimate is a weighted sum of (see :data:`FEATURES`)."""
    return _features(text, _ascii(text))


def _features(text: str, raw: bytes) -> Features:
    non_ascii = 0 if len(raw) == len(text) else len(text.encode("utf-8")) - len(raw)
    return (
        len(raw),
        raw.count(b" "),
        raw.count(b"\n"),
        raw.count(b"  "),
        _occurrences(raw, _PUNCTUATION),
        _occurrences(raw, _DIGITS),
        non_ascii,
    )


def _sample(text: str) -> str:
    if len(text) <= 3 * _WINDOW:
        return text
    middle = len(text) // 2 - _WINDOW // 2
    return text[:_WINDOW] + text[middle : middle + _WINDOW] + text[-_WINDOW:]


def _looks_encoded(raw: bytes) -> bool:
    n = len(raw)
    digits = _occurrences(raw, _DIGITS)
    if _occurrences(raw, _HEX) >= 0.9 * n and digits >= 0.3 * n:
        return True
    letters = _occurrences(raw, _LETTERS)
    upper = _occurrences(raw, _UPPER)
    return (
        _occurrences(raw, _BASE64) >= 0.95 * n
        and digits >= 0.05 * n
        and 0.2 * letters <= upper <= 0.8 * letters
    )


def classify(text: str) -> ContentKind:
    """Guess the kind of ``text`` from a sample of at most 3 KiB; constant time in ``len(text)``."""
    sample = _sample(text)
    raw = _ascii(sample)
    return _classify(sample, raw, raw.count(b" ") + raw.count(b"\n"))


def _classify(sample: str, raw: bytes, spaces_and_newlines: int) -> ContentKind:
    """:func:`classify` of a sample already encoded (``raw``) and partly counted."""
    n = len(sample)
    if n == 0:
        return ContentKind.PROSE
    if n - len(raw) > 0.25 * n:
        return ContentKind.NON_LATIN
    blanks = spaces_and_newlines + raw.count(b"\t")
    if n >= 64 and blanks < 0.02 * n and _looks_encoded(raw):
        return ContentKind.ENCODED
    if sample.lstrip()[:1] in ("{", "[") and (b'":' in raw or b"':" in raw):
        return ContentKind.JSON
    indented_lines = raw.count(b"\n    ") + raw.count(b"\n\t")
    if _occurrences(raw, _CODE_SYMBOLS) >= 0.05 * n or 4 * indented_lines >= 0.05 * n:
        return ContentKind.CODE
    return ContentKind.PROSE


def estimate_features(counts: Features, kind: ContentKind) -> float:
    """The (unrounded) token estimate for one piece with these counts, priced as ``kind``."""
    return sum(w * x for w, x in zip(COEFFICIENTS[kind], counts, strict=True))


class EstimatingCounter:
    """Token estimate without a tokenizer: O(len) C-level passes plus a 3 KiB classification.

    Accuracy against cl100k per kind is in ``docs/counters.md``; use it where exact counts are
    not worth ~1 µs per character of BPE, or where no BPE file is available offline.
    """

    name = "estimate:v1"

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) < SHORT:
            # Names, ids and small arguments: a few tokens, where classifying costs more than
            # it gains. cl100k averages ~3.2 UTF-8 bytes per token on such strings in the corpus
            # (tool names and arguments: −4 % in total against +6 % for the full estimate).
            return max(1, round(len(text.encode("utf-8", "surrogatepass")) / 3.2))
        # Features are additive counts, so a piece of one kind is priced in a single pass; the
        # kind is re-guessed every SPAN characters so that mixed outputs (a JSON blob inside a
        # log) are priced piece by piece.
        total = 0.0
        for start in range(0, len(text), SPAN):
            piece = text[start : start + SPAN]
            raw = _ascii(piece)
            counts = _features(piece, raw)
            if len(piece) <= 3 * _WINDOW:  # the sample is the piece: its counts are taken
                kind = _classify(piece, raw, counts[1] + counts[2])
            else:
                kind = classify(piece)
            total += estimate_features(counts, kind)
        # A fit can dip below zero on pathological input (pure whitespace); a non-empty text
        # always costs at least one token.
        return max(1, round(total))

    def __repr__(self) -> str:
        return "EstimatingCounter()"
