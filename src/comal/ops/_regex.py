"""User-supplied regular expressions run on RE2: linear time, whatever the pattern.

``(a+)+$`` against a long line of ``a`` takes microseconds instead of centuries. RE2 has no
backreferences and no lookaround; a pattern that needs them is refused with
:class:`~comal.ops.RegexUnsupported` rather than handed to a backtracking engine. A pattern
that is not a regular expression at all is a plain :class:`~comal.ops.ToolFailure`.
"""

from __future__ import annotations

import re

import re2

from ._errors import RegexUnsupported, ToolFailure

__all__ = ["MAX_PATTERN", "compile_pattern"]

MAX_PATTERN = 4096
# RE2 falls back to a slower (still linear) engine past this much DFA memory per pattern.
_MAX_MEM = 64 << 20


def compile_pattern(pattern: str, *, ignore_case: bool = False) -> re2._Regexp[str]:
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
        raise ToolFailure(f"bad regular expression {pattern!r}: {exc}") from None
    except (RecursionError, OverflowError, MemoryError):
        pass
    raise RegexUnsupported(
        f"the regular expression {pattern!r} needs a feature RE2 does not have ({why}); "
        "patterns run on RE2 in linear time, without backreferences or lookaround. Rewrite it "
        "without them"
    )
