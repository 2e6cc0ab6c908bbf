"""Permissions: allow/ask/deny rules per operation and argument pattern, modes and limits.

A rule reads like ``Bash(git *)``, ``Write(src/**)`` or ``Read(*)``: an operation name (``*``
wildcards allowed) and an optional pattern matched against the operation's *subject*:

- path subjects (file tools) are workspace-relative POSIX paths; ``*`` stays within one
  directory, ``**`` crosses directories;
- command subjects (``Bash``) are parsed with bashlex and judged **part by part**
  (:mod:`._bash_rules`): the simple commands that ``&&``, ``||``, ``;``, ``|``, ``&``,
  newlines, subshells and groups join are each matched against the rules. Any part a deny
  rule matches denies the command; any part an ask rule matches asks; the command is allowed
  only when every part is matched by an allow rule (each by any of them: ``Bash(ls *)`` and
  ``Bash(pwd)`` allow ``ls -a && pwd``, and ``Bash(git *)`` does not allow
  ``git status; rm -rf ~``). What hides a command is never allowed part by part: redirects
  to files, substitutions, wrappers (``env``, ``xargs``, ``find -exec`` …), a quoted or
  computed command word, a path to the program, and anything the parser cannot read (one
  opaque command, which only ``Bash``/``Bash(*)`` allows) — so
  ``echo x > ~/.config/comal/config.json`` is not allowed by ``Bash(echo *)``. Deny and ask
  rules also see the programs run through wrappers and spellings like ``/bin/rm``, ``\\rm``
  or ``r''m``. A decision on one part of several names it (:class:`~comal.ops.Part`). These
  rules are **advisory**: what a shell command can reach is enforced by the OS sandbox
  (``sandbox`` below), not by them;
- other subjects are matched whole; a missing pattern or ``*`` matches every call.

``limits.output_cap`` (bytes per output stream, default 4 MiB) bounds what Bash keeps of its
output. ``sandbox`` (:class:`~comal.ops.SandboxPolicy`) says what the OS sandbox allows:
``network``, extra ``writable_paths`` and ``protected_paths``, ``env_keep``, ``memory_cap``
(address space per process: 2 GiB by default, 64 MiB to 1 TiB, ``null`` or ``"off"`` for
none), ``unix_sockets`` (let past the seccomp filter); ``enabled: false`` (or ``sandbox:
"off"``) is the operator's opt-out, ``allow_unsandboxed: true`` runs without a sandbox only
where none is usable.

Precedence: a matching deny rule wins, then the read-only mode's ceiling, then ask, then allow,
then the mode's default (read-only: reads only; ask: reads allowed, mutations asked; trusted:
everything allowed, but an operation declared ``asks`` — a publish — is asked in every mode
unless an allow rule names it). Deny beats allow whatever the order the rules were written in.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import InputError
from . import _bash_rules as bash_rules
from ._bash_rules import command_matches
from ._model import Decision, Mode, Part
from ._operation import Operation
from ._sandbox import DEFAULT_MEMORY_CAP, MAX_MEMORY_CAP, MIN_MEMORY_CAP, SandboxPolicy
from ._shell import CommandView, view_command
from ._spool import DEFAULT_OUTPUT_CAP

__all__ = ["Limits", "Policy", "Rule", "RuleAction"]

RuleAction = Literal["allow", "ask", "deny"]
_RULE = re.compile(r"^(?P<op>[^()\s]+)(?:\((?P<pattern>.*)\))?$", re.DOTALL)


def _path_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


@dataclass(frozen=True, slots=True)
class Rule:
    operation: str
    pattern: str | None
    action: RuleAction

    @classmethod
    def parse(cls, text: str, action: RuleAction) -> Rule:
        match = _RULE.match(text.strip())
        if match is None:
            raise InputError(
                f"cannot read the rule {text!r}; write it as Operation or Operation(pattern)"
            )
        return cls(match["op"], match["pattern"], action)

    def __str__(self) -> str:
        return self.operation if self.pattern is None else f"{self.operation}({self.pattern})"

    def matches(self, op: Operation, subject: str | None) -> bool:
        if not fnmatch.fnmatchcase(op.name, self.operation):
            return False
        if self.pattern is None or self.pattern == "*":
            return True
        if subject is None:
            return False
        if op.subject_kind == "path":
            return _path_regex(self.pattern).fullmatch(subject) is not None
        if op.subject_kind == "command":
            return command_matches(self.pattern, subject, self.action)
        return fnmatch.fnmatchcase(subject, self.pattern)


@dataclass(frozen=True, slots=True)
class Limits:
    """Time limits in seconds. A call may ask for less time, or more up to ``max_timeout``.
    ``output_cap`` bounds, in bytes per stream, what a shell call keeps of its output."""

    default_timeout: float = 120.0
    max_timeout: float = 600.0
    timeouts: Mapping[str, float] = field(default_factory=dict)
    output_cap: int = DEFAULT_OUTPUT_CAP

    def timeout_for(self, operation: str, requested: float | None) -> float:
        base = self.timeouts.get(operation, self.default_timeout)
        wanted = base if requested is None else requested
        return max(0.001, min(wanted, self.max_timeout))


# A timeout is seconds in (0, 1 day]; NaN and infinity are refused (a NaN would compare
# false everywhere and a receipt would say "timeout" after a millisecond).
Seconds = Annotated[float, Field(gt=0, le=86_400, allow_inf_nan=False)]
MemoryCap = Annotated[ByteSize, Field(ge=MIN_MEMORY_CAP, le=MAX_MEMORY_CAP)]


class _LimitsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    default_timeout: Seconds = 120.0
    max_timeout: Seconds = 600.0
    timeouts: dict[str, Seconds] = Field(default_factory=dict)
    output_cap: int = Field(default=DEFAULT_OUTPUT_CAP, ge=64 * 1024, le=1 << 30)

    @model_validator(mode="after")
    def _ordered(self) -> _LimitsConfig:
        if "default_timeout" not in self.model_fields_set:
            # Only a maximum given: the default follows it down rather than contradicting it.
            self.default_timeout = min(self.default_timeout, self.max_timeout)
        over = {k: v for k, v in self.timeouts.items() if v > self.max_timeout}
        if self.default_timeout > self.max_timeout or over:
            raise ValueError(
                f"timeouts must not exceed max_timeout ({self.max_timeout}s): "
                f"default_timeout {self.default_timeout}s"
                + (f", {', '.join(f'{k} {v}s' for k, v in over.items())}" if over else "")
            )
        return self


class _SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    allow_unsandboxed: bool = False
    network: bool = False
    writable_paths: list[str] = Field(default_factory=list)
    protected_paths: list[str] = Field(default_factory=list)
    env_keep: list[str] = Field(default_factory=list)
    memory_cap: MemoryCap | None = Field(
        default=ByteSize(DEFAULT_MEMORY_CAP),
        description="Address space each sandboxed process may map (RLIMIT_AS): bytes or a "
        'size with a unit ("2GiB"), 64 MiB to 1 TiB; null or "off": no cap.',
    )

    unix_sockets: bool = Field(
        default=False,
        description="Let sandboxed processes create Unix sockets (the seccomp filter refuses "
        "them otherwise).",
    )

    @field_validator("memory_cap", mode="before")
    @classmethod
    def _cap_off(cls, value: Any) -> Any:
        return None if value == "off" else value


class _PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: Mode = "ask"
    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    limits: _LimitsConfig = Field(default_factory=lambda: _LimitsConfig())
    sandbox: _SandboxConfig = Field(default_factory=lambda: _SandboxConfig())

    @field_validator("sandbox", mode="before")
    @classmethod
    def _switch(cls, value: Any) -> Any:
        if value in ("off", False):
            return {"enabled": False}
        if value in ("on", True):
            return {}
        return value


@dataclass(frozen=True, slots=True)
class Policy:
    """Rules, the starting mode and limits. The live mode is a host setting (``/mode``)."""

    mode: Mode = "ask"
    rules: tuple[Rule, ...] = ()
    limits: Limits = field(default_factory=Limits)
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)

    @classmethod
    def from_config(cls, data: Mapping[str, Any]) -> Policy:
        """Build from ``{"mode", "allow": [...], "ask": [...], "deny": [...], "limits",
        "sandbox"}``."""
        try:
            cfg = _PolicyConfig.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "policy"
            raise InputError(
                f"bad policy setting: {first['msg']}; fix the value or remove the key to use "
                "the default",
                field=where,
            ) from exc
        groups: tuple[tuple[RuleAction, list[str]], ...] = (
            ("deny", cfg.deny),
            ("ask", cfg.ask),
            ("allow", cfg.allow),
        )
        rules = tuple(Rule.parse(text, action) for action, texts in groups for text in texts)
        limits = Limits(
            cfg.limits.default_timeout,
            cfg.limits.max_timeout,
            dict(cfg.limits.timeouts),
            cfg.limits.output_cap,
        )
        box = cfg.sandbox
        sandbox = SandboxPolicy(
            box.enabled,
            box.allow_unsandboxed,
            box.network,
            tuple(box.writable_paths),
            tuple(box.protected_paths),
            tuple(box.env_keep),
            None if box.memory_cap is None else int(box.memory_cap),
            box.unix_sockets,
        )
        return cls(cfg.mode, rules, limits, sandbox)

    def with_rules(self, *rules: Rule) -> Policy:
        return replace(self, rules=self.rules + rules)

    def decide(
        self,
        op: Operation,
        args: Any,
        mode: Mode | None = None,
        *,
        subject: str | None = None,
    ) -> Decision:
        """``subject`` overrides ``op.subject(args)``: the judge passes paths normalised to the
        workspace, so ``./secret/k`` or an absolute path cannot slip past ``Write(secret/**)``."""
        mode = mode or self.mode
        if subject is None and op.subject is not None:
            subject = op.subject(args)
        if op.subject_kind == "command" and subject is not None:
            return _Command(self.rules, op, view_command(subject)).decide(mode)
        matching = [r for r in self.rules if r.matches(op, subject)]
        deny = next((r for r in matching if r.action == "deny"), None)
        if deny is not None:
            return Decision.deny(str(deny), f"denied by the rule {deny}")
        if mode == "read-only" and not op.read_only:
            return _read_only(op)
        ask = next((r for r in matching if r.action == "ask"), None)
        if ask is not None:
            return Decision.ask(str(ask), f"the rule {ask} asks for approval")
        allow = next((r for r in matching if r.action == "allow"), None)
        if allow is not None:
            return Decision.allow(str(allow))
        return _by_mode(op, mode, f"{op.name} changes the world and the mode asks for writes")


def _read_only(op: Operation) -> Decision:
    kinds = ", ".join(sorted({e.kind for e in op.effects}))
    return Decision.deny(
        "mode:read-only",
        f"{op.name} has effects ({kinds}) and the session is read-only; "
        "a human can change the mode with /mode",
    )


def _by_mode(op: Operation, mode: Mode, why: str, part: Part | None = None) -> Decision:
    """No rule decided: the operation's own ask, else the mode's default (``why`` says what
    the mode asks about)."""
    if op.asks:
        # What it does cannot be taken back (a publish): only a rule naming the operation
        # allows it without asking, whatever the mode.
        return Decision.ask(
            f"operation:{op.name}", f"{op.name} is asked unless a rule allows it by name"
        )
    if op.read_only or mode == "trusted":
        return Decision.allow(f"mode:{mode}")
    return Decision.ask("mode:ask", why, part)


@dataclass(frozen=True, slots=True)
class _Command:
    """One Bash command judged part by part (:mod:`._bash_rules`) under the rules for its
    operation, with the same precedence as any call: deny, read-only, ask, allow, the mode."""

    rules: tuple[Rule, ...]
    op: Operation
    view: CommandView

    def _rules(self, action: RuleAction) -> list[Rule]:
        return [
            r
            for r in self.rules
            if r.action == action and fnmatch.fnmatchcase(self.op.name, r.operation)
        ]

    def _part(self, index: int) -> Part | None:
        """The part to name: none for the command as a whole or a command of one part."""
        parts = self.view.parts
        if index < 0 or len(parts) < 2:
            return None
        return Part(index + 1, len(parts), parts[index])

    def _first(self, action: RuleAction) -> tuple[Rule, Part | None] | None:
        for rule in self._rules(action):
            if rule.pattern is None or rule.pattern == "*":
                return rule, None
            where = bash_rules.hit(rule.pattern, self.view)
            if where is not None:
                return rule, self._part(where)
        return None

    def decide(self, mode: Mode) -> Decision:
        denied = self._first("deny")
        if denied is not None:
            rule, part = denied
            on = f" on {part}" if part is not None else ""
            return Decision.deny(str(rule), f"denied by the rule {rule}{on}", part)
        if mode == "read-only" and not self.op.read_only:
            return _read_only(self.op)
        asked = self._first("ask")
        if asked is not None:
            rule, part = asked
            on = f" on {part}" if part is not None else ""
            return Decision.ask(str(rule), f"the rule {rule} asks for approval{on}", part)
        allowed = self._allowed()
        if isinstance(allowed, Decision):
            return allowed
        index, why = allowed
        part = self._part(index)
        what = f"{part}," if part is not None else "the command"
        return _by_mode(self.op, mode, f"{what} {why}; the mode asks", part)

    def _allowed(self) -> Decision | tuple[int, str]:
        """Allowed by the rules, or (the first part no rule allows, why) for the mode."""
        allows = self._rules("allow")
        broad = next((r for r in allows if r.pattern is None or r.pattern == "*"), None)
        if broad is not None:
            return Decision.allow(str(broad))
        stop = bash_rules.blocker(self.view)
        if stop is not None:
            return stop
        named = [r for r in allows if r.pattern is not None]
        exact = next((r for r in named if bash_rules.exactly(r.pattern or "", self.view)), None)
        if exact is not None:
            return Decision.allow(str(exact))
        found = bash_rules.each_part(named, self.view)
        missing = next((i for i, r in enumerate(found) if r is None), None)
        if missing is not None:
            return missing, "matches no allow rule"
        used = list(dict.fromkeys(str(r) for r in found))
        if len(found) == 1:
            return Decision.allow(used[0])
        why = "; ".join(f"{p} by {r}" for p, r in ((self._part(i), r) for i, r in enumerate(found)))
        return Decision.allow(" + ".join(used), f"each part allowed: {why}")
