"""What a ``Bash(...)`` rule sees of a command: bashlex's parse, its parts, risks named.

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
- the command's *parts* are its simple commands as written, wherever lists (``&&``, ``||``,
  ``;``, ``&``, newlines), pipelines (``|``, ``|&``, ``!``), subshells, groups and
  ``if``/``for``/``while`` bodies put them; a bare assignment (``PATH=…``) is a part too.
  What runs inside a part (a substitution, a wrapper's program, a ``bash -c`` script) belongs
  to that part;
- *risks* are what an allow rule must not admit: redirects (other than duplicating or closing
  a descriptor, ``2>&1``, and ``/dev/null``) and here-documents, command and process
  substitutions, expansions or quoting in a command word, a path to a program, a wrapper,
  ``find -exec``/``-delete``, git configuration overrides and alias definitions, a function
  definition, sourcing a file, and any command bashlex cannot parse. Each risk is kept with
  the part it was found in (or none: a redirect on a whole group).

How rules use this view — part by part — is :mod:`._bash_rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CommandView", "Invocation", "view_command"]


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


@dataclass(frozen=True, slots=True)
class Invocation:
    """One program a command would run. ``program`` is ``None`` when the command word is
    computed at run time (``$X``, ``$(...)``); ``text`` is the source it came from; ``part``
    the index of the part it runs in (-1: outside any, as in a ``for`` loop's word list)."""

    program: str | None
    args: tuple[str, ...]
    text: str
    indirect: bool = False
    part: int = -1

    @property
    def normalized(self) -> str:
        return " ".join((self.program or "", *self.args)).strip()


@dataclass(frozen=True, slots=True)
class CommandView:
    """``parts`` are the texts rules judge one by one (harmless redirects left out);
    ``part_risks`` pairs each risk with the part it was found in (-1: none)."""

    text: str
    parsed: bool
    invocations: tuple[Invocation, ...] = ()
    risks: tuple[str, ...] = ()
    error: str | None = None
    parts: tuple[str, ...] = ()
    part_risks: tuple[tuple[int, str], ...] = ()


@dataclass
class _Builder:
    source: str
    invocations: list[Invocation] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)
    parsed: bool = True
    parts: list[str] = field(default_factory=list)
    part_risks: list[tuple[int, str]] = field(default_factory=list)
    part: int = -1  # the part being read, -1 between parts

    def risk(self, why: str) -> None:
        if why not in self.risks:
            self.risks.append(why)
        if (self.part, why) not in self.part_risks:
            self.part_risks.append((self.part, why))

    def run(self, program: str | None, args: tuple[str, ...], text: str, indirect: bool) -> None:
        self.invocations.append(Invocation(program, args, text, indirect, self.part))


def _children(node: Any) -> list[Any]:
    out: list[Any] = []
    for name in ("parts", "list", "redirects"):  # a group's or a loop's redirects too
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
        indirect = True
    elif kind == "processsubstitution":
        b.risk("process substitution")
        indirect = True
    elif kind == "redirect":
        if _harmless(node):
            return
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


# Redirects that write no file and read none: /dev/null, and duplicating or closing a
# descriptor (``2>&1``, ``>&2``, ``>&-``). A here-document or here-string is never one.
_DEV_NULL = "/dev/null"
_HERE = frozenset({"<<", "<<-", "<<<"})


def _harmless(node: Any) -> bool:
    kind = getattr(node, "type", "")
    target: Any = getattr(node, "output", None)
    if kind in _HERE:
        return False
    if kind in (">&", "<&") and (isinstance(target, int) or target == "-"):
        return True
    return (
        getattr(target, "kind", "") == "word"
        and not _word_parts(target)
        and str(target.word) == _DEV_NULL
    )


def _part_text(node: Any, source: str) -> str:
    """The command's source with its harmless redirects cut out: what a rule is matched to,
    so ``pytest -q 2>&1`` is judged as ``pytest -q``."""
    start, end = node.pos
    cuts = sorted(
        p.pos for p in node.parts if getattr(p, "kind", "") == "redirect" and _harmless(p)
    )
    out, at = [], start
    for a, b in cuts:
        kept = source[at:a]
        trimmed = kept.rstrip(" \t")
        out.append(kept if trimmed.endswith("\\") else trimmed)  # an escaped blank stays
        at = b
    out.append(source[at:end])
    return "".join(out).strip()


def _command(node: Any, b: _Builder, depth: int, source: str, indirect: bool) -> None:
    if indirect:
        _simple(node, b, depth, source, True)
        return
    outer, b.part = b.part, len(b.parts)
    b.parts.append(_part_text(node, source))
    try:
        # What runs inside this part (substitutions, redirect targets) belongs to it.
        _simple(node, b, depth, source, False)
    finally:
        b.part = outer


def _simple(node: Any, b: _Builder, depth: int, source: str, indirect: bool) -> None:
    words: list[Any] = []
    for part in node.parts:
        kind = getattr(part, "kind", "")
        if kind == "word":
            words.append(part)
        elif kind == "assignment" and not words:
            if _word_parts(part):
                b.risk("expansion in an assignment")
            for child in _children(part):
                _visit(child, b, depth, source, True)
        else:
            _visit(part, b, depth, source, True)
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
        b.run(None, tuple(values[1:]), text, indirect)
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
    b.run(program, tuple(args), text, indirect)
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
            b.run("rm", ("(find -delete)",), text, True)
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
        b.run(None, (), text, indirect)
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
    return CommandView(
        command,
        b.parsed,
        tuple(b.invocations),
        tuple(b.risks),
        error,
        tuple(b.parts),
        tuple(b.part_risks),
    )
