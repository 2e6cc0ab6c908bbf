"""What a ``Bash(...)`` rule sees of a command: bashlex's parse, unwrapped, risky parts named.

Pattern rules over commands are an **advisory convenience**: the OS sandbox (:mod:`._sandbox`)
is what keeps a command inside the workspace. The rules are still made as hard to fool as a
real parser allows, and where they cannot understand a command they fail towards asking:

- the command is parsed with ``bashlex``; every simple command anywhere in it (pipelines,
  lists, ``if``/``for``/``while`` bodies, subshells, functions, command and process
  substitutions) becomes an :class:`Invocation` whose program is the command word with quotes
  and backslashes removed and directories stripped (``/bin/rm``, ``\\rm``, ``r''m`` are
  ``rm``);
- wrappers that run another program (``env``, ``command``, ``exec``, ``xargs``, ``nohup``,
  ``sudo``, ``timeout``, ``nice``, ``setsid`` …), ``find -exec``/``-execdir``/``-ok``, and
  shells given ``-c`` or ``eval`` contribute the program they run as a further invocation;
  ``find -delete`` counts as ``rm``;
- *risks* are what an allow rule must not admit: redirects and here-documents, command and
  process substitutions, expansions or quoting in a command word, a path to a program, a
  wrapper, ``find -exec``/``-delete``, git configuration overrides and alias definitions, a
  function definition, sourcing a file, and any command bashlex cannot parse.

:func:`command_matches` then decides: an **allow** rule matches only a parsed command without
risks whose every invocation matches the pattern; a **deny** or **ask** rule matches if the
whole text, any invocation (as written or normalised), or — for an unparseable command or a
command word that is computed at run time — any mention of the program the pattern names
does.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CommandView", "Invocation", "command_matches", "view_command"]


def _bashlex() -> Any:
    """bashlex, imported on first use: its parser builds its tables at import (half a second),
    which no command that runs no Bash rule should pay."""
    import bashlex  # type: ignore[import-untyped]

    return bashlex


# Programs whose arguments name another program to run; the value lists the options that take
# an argument (so it is skipped with them).
_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "nohup": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "time": frozenset({"-f", "-o"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "setsid": frozenset(),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-U", "-r", "-t"}),
    "doas": frozenset({"-u", "-C"}),
    "xargs": frozenset(
        {"-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--delimiter"}
    ),
    "chroot": frozenset(),
    "strace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
    "ltrace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
    "watch": frozenset({"-n", "-d"}),
    "flock": frozenset({"-w", "-E", "-c"}),
    "unbuffer": frozenset(),
    "busybox": frozenset(),
    "chrt": frozenset(),
    "taskset": frozenset(),
    "runuser": frozenset({"-u", "-g"}),
    "doit": frozenset(),
}
# The first non-option argument of these is not the program (a duration, a directory, ...).
_SKIP_ONE = frozenset({"timeout", "chroot", "chrt", "taskset", "flock"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "su"})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_MAX_DEPTH = 4
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Invocation:
    """One program a command would run. ``program`` is ``None`` when the command word is
    computed at run time (``$X``, ``$(...)``); ``text`` is the source it came from."""

    program: str | None
    args: tuple[str, ...]
    text: str
    indirect: bool = False

    @property
    def normalized(self) -> str:
        return " ".join((self.program or "", *self.args)).strip()


@dataclass(frozen=True, slots=True)
class CommandView:
    text: str
    parsed: bool
    invocations: tuple[Invocation, ...] = ()
    risks: tuple[str, ...] = ()
    error: str | None = None


@dataclass
class _Builder:
    source: str
    invocations: list[Invocation] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)
    parsed: bool = True

    def risk(self, why: str) -> None:
        if why not in self.risks:
            self.risks.append(why)


def _children(node: Any) -> list[Any]:
    out: list[Any] = []
    for name in ("parts", "list"):
        value = getattr(node, name, None)
        if isinstance(value, list):
            out.extend(value)
    for name in ("command", "output", "heredoc"):
        value = getattr(node, name, None)
        if value is not None and hasattr(value, "kind"):
            out.append(value)
    return out


def _visit(node: Any, b: _Builder, depth: int, source: str, indirect: bool) -> None:
    kind = getattr(node, "kind", "")
    if kind == "command":
        _command(node, b, depth, source, indirect)
        return
    if kind == "commandsubstitution":
        b.risk("command substitution")
    elif kind == "processsubstitution":
        b.risk("process substitution")
    elif kind == "redirect":
        b.risk("redirect")
    elif kind == "heredoc":
        b.risk("here-document")
    elif kind == "function":
        b.risk("function definition")
    for child in _children(node):
        _visit(child, b, depth, source, indirect)


def _word_parts(word: Any) -> list[Any]:
    parts = getattr(word, "parts", None)
    return parts if isinstance(parts, list) else []


def _command(node: Any, b: _Builder, depth: int, source: str, indirect: bool) -> None:
    words: list[Any] = []
    for part in node.parts:
        kind = getattr(part, "kind", "")
        if kind == "word":
            words.append(part)
        elif kind == "assignment" and not words:
            if _word_parts(part):
                b.risk("expansion in an assignment")
            for child in _children(part):
                _visit(child, b, depth, source, indirect)
        else:
            _visit(part, b, depth, source, indirect)
    for word in words:  # substitutions inside arguments run too
        for child in _word_parts(word):
            _visit(child, b, depth, source, True)
    if not words:
        return
    start, end = node.pos
    text = source[start:end]
    head = words[0]
    raw = source[head.pos[0] : head.pos[1]]
    values = [str(w.word) for w in words]
    if _word_parts(head):
        b.risk("expansion in the command word")
        b.invocations.append(Invocation(None, tuple(values[1:]), text, indirect))
        return
    if raw != head.word:
        b.risk("quoting in the command word")
    _program(values, text, b, depth, indirect)


def _program(values: list[str], text: str, b: _Builder, depth: int, indirect: bool) -> None:
    word = values[0]
    program = word.rsplit("/", 1)[-1] if "/" in word.rstrip("/") else word
    if "/" in word:
        b.risk("a path to the program")
    args = values[1:]
    b.invocations.append(Invocation(program, tuple(args), text, indirect))
    if depth >= _MAX_DEPTH:
        b.risk("wrappers nested too deep")
        return
    if program in _WRAPPERS:
        b.risk(f"the wrapper {program}")
        inner = _unwrap(program, args)
        if program == "env" and _has_split_string(args):
            b.risk("env -S")
        if inner:
            _program(inner, text, b, depth + 1, True)
    elif program in _SHELLS or program == "eval":
        script = _shell_script(program, args)
        if script is not None:
            b.risk(f"a script run by {program}")
            _parse_into(script, b, depth + 1, indirect=True)
        elif program != "eval" and args:
            b.risk(f"a script file run by {program}")
    elif program in ("source", "."):
        b.risk("sourcing a file")
    elif program == "find":
        _find(args, text, b, depth)
    elif program == "git":
        _git(args, b)


def _has_split_string(args: list[str]) -> bool:
    return any(a in ("-S", "--split-string") or a.startswith("--split-string=") for a in args)


def _unwrap(program: str, args: list[str]) -> list[str]:
    takes = _WRAPPERS[program]
    i = 0
    skipped_one = program not in _SKIP_ONE
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg.startswith("-") and len(arg) > 1:
            i += 2 if arg in takes else 1
            continue
        if program == "env" and "=" in arg:
            i += 1
            continue
        if not skipped_one:
            skipped_one = True
            i += 1
            continue
        break
    return args[i:]


def _shell_script(program: str, args: list[str]) -> str | None:
    if program == "eval":
        return " ".join(args) if args else None
    for i, arg in enumerate(args):
        if arg == "-c" or (arg.startswith("-") and not arg.startswith("--") and "c" in arg):
            return args[i + 1] if i + 1 < len(args) else ""
    return None


def _find(args: list[str], text: str, b: _Builder, depth: int) -> None:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _FIND_EXEC:
            b.risk(f"find {arg}")
            j = i + 1
            while j < len(args) and args[j] not in (";", "+"):
                j += 1
            if j > i + 1:
                _program(args[i + 1 : j], text, b, depth + 1, True)
            i = j
        elif arg == "-delete":
            b.risk("find -delete")
            b.invocations.append(Invocation("rm", ("(find -delete)",), text, True))
        elif arg in ("-fprint", "-fprintf", "-fls", "-fprint0"):
            b.risk(f"find {arg}")
        i += 1


def _git(args: list[str], b: _Builder) -> None:
    for i, arg in enumerate(args):
        if arg in ("-c", "--config-env", "--exec-path") or arg.startswith(
            ("--config-env=", "--exec-path=", "-c")
        ):
            b.risk("a git configuration override")
        if arg == "config" and any(a.startswith("alias.") for a in args[i + 1 :]):
            b.risk("a git alias definition")


def _parse_into(text: str, b: _Builder, depth: int, *, indirect: bool) -> None:
    try:
        trees = _bashlex().parse(text)
    except Exception:  # bashlex raises its own errors and, on odd input, plain ones
        b.parsed = False
        b.risk("a command the parser cannot read")
        b.invocations.append(Invocation(None, (), text, indirect))
        return
    for tree in trees:
        _visit(tree, b, depth, text, indirect)


def view_command(command: str) -> CommandView:
    """The parse of ``command`` as rules see it (see the module docstring)."""
    b = _Builder(command)
    error = None
    if not command.strip():
        return CommandView(command, True)
    try:
        trees = _bashlex().parse(command)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        return CommandView(command, False, (), ("a command the parser cannot read",), error)
    for tree in trees:
        _visit(tree, b, 0, command, False)
    return CommandView(command, b.parsed, tuple(b.invocations), tuple(b.risks), error)


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


def command_matches(pattern: str, command: str, action: str) -> bool:
    """Does the rule ``Bash(pattern)`` with ``action`` match ``command``?"""
    view = view_command(command)
    if action == "allow":
        if not view.parsed or view.risks or not view.invocations:
            return False
        return all(fnmatch.fnmatchcase(i.text.strip(), pattern) for i in view.invocations)
    if fnmatch.fnmatchcase(command.strip(), pattern):
        return True
    program = _pattern_program(pattern)
    whole = program is not None and pattern.strip() in (program, f"{program} *")
    for inv in view.invocations:
        if inv.program is None:
            if program is not None and _names(inv.text, program):
                return True
            continue
        if whole and inv.program == program:
            return True
        if fnmatch.fnmatchcase(inv.normalized, pattern) or fnmatch.fnmatchcase(
            inv.text.strip(), pattern
        ):
            return True
    if not view.parsed and program is not None:
        return _names(command, program)
    return False
