"""Every regular expression a user or a model supplies runs on RE2: linear time, whatever the
pattern.

``(a+)+$`` against a long line of ``a`` takes microseconds instead of centuries. RE2 has no
backreferences and no lookaround; a pattern that needs them is refused with a reason rather than
handed to a backtracking engine. Grep, EvidenceRead, ``ctx_search``, ``session_search`` and
``comal search --regex`` all compile here, each turning :class:`PatternError` into its own coded
error, so no search path is left on Python's ``re``.
"""

from __future__ import annotations

import re

import re2

__all__ = ["MAX_PATTERN", "PatternError", "compile_linear", "searchable"]

MAX_PATTERN = 4096
# RE2 falls back to a slower (still linear) engine past this much DFA memory per pattern.
_MAX_MEM = 64 << 20
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class PatternError(ValueError):
    """A pattern that does not compile: ``unsupported`` when it is a valid pattern RE2 cannot
    run (backreferences, lookaround), else not a pattern at all. ``str()`` says which."""

    def __init__(self, message: str, *, unsupported: bool) -> None:
        super().__init__(message)
        self.unsupported = unsupported


def compile_linear(pattern: str, *, ignore_case: bool = False) -> re2._Regexp[str]:
    if len(pattern) > MAX_PATTERN:
        raise PatternError(
            f"the regular expression is {len(pattern):,} characters; at most {MAX_PATTERN:,}",
            unsupported=False,
        )
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.max_mem = _MAX_MEM
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else exc
        why = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    try:
        re.compile(pattern)
    except re.error as exc:  # not a pattern in any engine: say what is wrong with it
        raise PatternError(
            f"bad regular expression {pattern!r}: {exc}", unsupported=False
        ) from None
    except (RecursionError, OverflowError, MemoryError):
        pass
    raise PatternError(
        f"the regular expression {pattern!r} needs a feature RE2 does not have ({why}); "
        "patterns run on RE2 in linear time, without backreferences or lookaround. Rewrite it "
        "without them",
        unsupported=True,
    )


def searchable(text: str) -> str:
    """``text`` with each lone surrogate (stored tool output may hold them) as U+FFFD: RE2 reads
    UTF-8, which cannot encode them. One code point for one, so every match offset holds."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)
