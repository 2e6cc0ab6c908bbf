"""Grep's patterns compile on RE2 (:mod:`comal._regex`): linear time, whatever the pattern.

A pattern that needs a feature RE2 lacks (backreferences, lookaround) is refused with
:class:`~comal.ops.RegexUnsupported` rather than handed to a backtracking engine; one that is not
a regular expression at all is a plain :class:`~comal.ops.ToolFailure`.
"""

from __future__ import annotations

import re2

from .._regex import MAX_PATTERN, PatternError, compile_linear
from ._errors import RegexUnsupported, ToolFailure

__all__ = ["MAX_PATTERN", "compile_pattern"]


def compile_pattern(pattern: str, *, ignore_case: bool = False) -> re2._Regexp[str]:
    try:
        return compile_linear(pattern, ignore_case=ignore_case)
    except PatternError as exc:
        raise (RegexUnsupported if exc.unsupported else ToolFailure)(str(exc)) from None
