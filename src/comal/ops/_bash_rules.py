"""How ``Bash(...)`` rules judge a command: part by part, as Claude Code does (DRV-5, OPS-7).

:mod:`._shell` cuts a command into *parts* with a real parser: the simple commands that
``&&``, ``||``, ``;``, ``&``, newlines, pipelines (``|``, ``|&``, ``!``), subshells, groups and
``if``/``for``/``while`` bodies put together. A separator inside quotes (``echo "a && b"``)
separates nothing. Then:

- a **deny** or **ask** rule matches when any part does: the part as written, any program it
  runs (through wrappers, substitutions, ``bash -c``, ``find -exec``; normalised, so
  ``/bin/rm``, ``\\rm`` and ``r''m`` are ``rm``), a mention of the program where the command
  word is computed at run time or the parser cannot read the command, or the whole text;
  :func:`hit` says which part;
- **allow** needs every part matched by an allow rule, each part by any of them
  (``Bash(ls *)`` and ``Bash(pwd)`` together allow ``ls -a && pwd``). A command with a risk —
  what hides a command: substitutions, redirects to files, wrappers, ``bash -c`` … — is not
  allowed part by part, and one the parser cannot read is a single opaque command: only a
  rule matching every command (``Bash``, ``Bash(*)``) allows those. A rule naming the whole
  command exactly, with no wildcard (what the TUI's "always" writes), allows exactly that
  command when it has no risk (:func:`exactly`).

Patterns read as Claude Code's: ``*`` matches any characters, spaces included; a trailing
`` *`` that is the pattern's only wildcard may match nothing (``Bash(ls *)`` matches ``ls`` and
``ls -a``, never ``lsof``); ``prefix:*`` is the older spelling of ``prefix *``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

from ._shell import CommandView

__all__ = ["WHOLE", "blocker", "command_matches", "each_part", "exactly", "fits", "hit"]

WHOLE = -1  # a match on the command as a whole, not on one of its parts
_GLOB_CHARS = frozenset("*?[")


class RuleLike(Protocol):
    @property
    def pattern(self) -> str | None: ...


R = TypeVar("R", bound=RuleLike)


def _normal(pattern: str) -> str:
    return pattern[:-2] + " *" if pattern.endswith(":*") else pattern


def fits(text: str, pattern: str) -> bool:
    """Does ``text`` (one part, or a program as run) match ``pattern``?"""
    pattern = _normal(pattern)
    if fnmatch.fnmatchcase(text, pattern):
        return True
    return (
        pattern.endswith(" *")
        and pattern.count("*") == 1
        and fnmatch.fnmatchcase(text, pattern[:-2])
    )


def _unquoted(text: str) -> str:
    return text.replace("'", "").replace('"', "").replace("\\", "")


def _names(text: str, program: str) -> bool:
    edge = r"A-Za-z0-9_.+-"
    return re.search(rf"(?<![{edge}]){re.escape(program)}(?![{edge}])", _unquoted(text)) is not None


def _pattern_program(pattern: str) -> str | None:
    first = pattern.split(None, 1)[0] if pattern.strip() else ""
    if not first or _GLOB_CHARS & set(first):
        return None
    return first.rsplit("/", 1)[-1] or None


def hit(pattern: str, view: CommandView) -> int | None:
    """Where a deny or ask rule ``Bash(pattern)`` matches: a part's index, :data:`WHOLE`, or
    ``None`` when it matches nothing."""
    pattern = _normal(pattern)
    program = _pattern_program(pattern)
    whole = program is not None and pattern.strip() in (program, f"{program} *")
    for index, text in enumerate(view.parts):
        if fits(text, pattern):
            return index
    for inv in view.invocations:
        if inv.program is None:
            if program is not None and _names(inv.text, program):
                return inv.part
            continue
        if whole and inv.program == program:
            return inv.part
        if fits(inv.normalized, pattern) or fits(inv.text.strip(), pattern):
            return inv.part
    if fits(view.text.strip(), pattern):
        return WHOLE
    if not view.parsed and program is not None and _names(view.text, program):
        return WHOLE
    return None


def blocker(view: CommandView) -> tuple[int, str] | None:
    """Why no allow rule can admit ``view`` part by part — (the part or :data:`WHOLE`, why) —
    or ``None`` when each part may be judged on its own."""
    if not view.parsed:
        return WHOLE, "cannot be read by the parser: one opaque command no narrower rule allows"
    if view.part_risks:
        part, why = view.part_risks[0]
        return part, f"cannot be allowed part by part ({why})"
    if not view.parts:
        return WHOLE, "runs no command a rule could name"
    return None


def _literal(pattern: str) -> bool:
    """A pattern that matches one text only: no wildcard outside a one-character class."""
    return re.fullmatch(r"(?:[^*?\[]|\[[^\]]\])*", pattern) is not None


def exactly(pattern: str, view: CommandView) -> bool:
    """Does an allow rule name this whole command, with no wildcard? (A command with risks is
    never allowed this way either: see :func:`blocker`.)"""
    return _literal(pattern) and fnmatch.fnmatchcase(view.text.strip(), pattern)


def each_part(rules: Sequence[R], view: CommandView) -> list[R | None]:
    """For each part, the first allow rule with a pattern that matches it (or ``None``)."""
    out: list[R | None] = []
    for text in view.parts:
        out.append(
            next((r for r in rules if r.pattern is not None and fits(text, r.pattern)), None)
        )
    return out


def command_matches(pattern: str, command: str, action: str) -> bool:
    """Does the one rule ``Bash(pattern)`` with ``action`` match ``command``? For allow: every
    part by this rule alone (:meth:`Policy.decide` lets each part find its own)."""
    from ._shell import view_command

    view = view_command(command)
    if action != "allow":
        return hit(pattern, view) is not None
    if blocker(view) is not None:
        return False
    return exactly(pattern, view) or all(fits(text, pattern) for text in view.parts)
