"""What a hook's run says, read as Claude Code reads it: its exit code, and its stdout as JSON
when it is an object (``{`` … ``}``), else as plain text.

- exit 2 blocks, whatever the JSON says; the reason is the JSON's blocking reason when it
  gives one, else stderr;
- a JSON object decides on any other exit code: ``hookSpecificOutput.permissionDecision``
  (``deny``/``ask``/``defer``/``allow``) and its reason before a tool call (the deprecated
  top-level ``decision: "block"``/``"approve"`` too), ``decision: "block"`` with ``reason``
  elsewhere, ``hookSpecificOutput.additionalContext``, ``continue: false`` with
  ``stopReason``; ``suppressOutput`` and ``systemMessage`` are kept in the record;
- exit 0 with plain text: context for ``SessionStart`` and ``UserPromptSubmit``, nothing
  elsewhere;
- anything else — another exit code without JSON, JSON that does not parse or has the wrong
  shape, a timeout, a hook that could not start — is a non-blocking error: recorded, and
  the action goes on, as Claude Code does.

Context is capped at :data:`CONTEXT_CHARS` characters per string (Claude Code's cap); past it
the rest is cut and the cut said.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._run import HookRun

__all__ = ["CONTEXT_CHARS", "Reply", "read_reply"]

CONTEXT_CHARS: Final = 10_000
# Events whose plain stdout on exit 0 is context for the model.
_PLAIN_CONTEXT: Final = frozenset({"SessionStart", "UserPromptSubmit"})


class _Specific(BaseModel):
    model_config = ConfigDict(extra="allow")

    hookEventName: str | None = None
    permissionDecision: Literal["allow", "deny", "ask", "defer"] | None = None
    permissionDecisionReason: str | None = None
    additionalContext: str | None = None
    updatedInput: dict[str, Any] | None = None


class _Output(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    continue_: bool = Field(default=True, alias="continue")
    stopReason: str | None = None
    suppressOutput: bool = False
    systemMessage: str | None = None
    decision: Literal["block", "approve"] | None = None
    reason: str | None = None
    hookSpecificOutput: _Specific | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """One run's answer: ``block`` (exit 2, ``deny`` before a tool call, ``decision: block``),
    ``ask`` (``ask`` or ``defer`` before a tool call), with ``reason``; ``context`` for the
    model; ``stop`` (``continue: false``: the run ends, saying this); ``updated_input`` (a
    rewritten tool input); ``error``: why the run says nothing."""

    block: bool = False
    ask: bool = False
    reason: str = ""
    context: str = ""
    stop: str | None = None
    updated_input: dict[str, Any] | None = None
    system_message: str = ""
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("block", "ask", "reason", "context", "stop", "updated_input"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.system_message:
            out["system_message"] = self.system_message
        if self.error is not None:
            out["error"] = self.error
        return out


def capped(text: str) -> str:
    if len(text) <= CONTEXT_CHARS:
        return text
    cut = len(text) - CONTEXT_CHARS
    return f"{text[:CONTEXT_CHARS]}\n[{cut:,} more characters of the hook's output cut here]"


def _from_output(event: str, out: _Output) -> Reply:
    spec = out.hookSpecificOutput
    stop = (out.stopReason or "a hook said continue: false") if not out.continue_ else None
    context = capped(spec.additionalContext) if spec and spec.additionalContext else ""
    said = out.systemMessage or ""
    if event == "PreToolUse":
        decision = spec.permissionDecision if spec is not None else None
        reason = capped((spec.permissionDecisionReason if spec is not None else None) or "")
        if decision is None and out.decision is not None:  # the deprecated top-level form
            decision = "deny" if out.decision == "block" else "allow"
            reason = capped(out.reason or "")
        updated = spec.updatedInput if spec is not None else None
        return Reply(
            decision == "deny", decision in ("ask", "defer"), reason, context, stop, updated, said
        )
    return Reply(
        out.decision == "block", False, capped(out.reason or ""), context, stop, None, said
    )


def _parse(event: str, text: str) -> tuple[_Output | None, str | None]:
    if not (text.startswith("{") and text.endswith("}")):
        return None, None
    try:
        out = _Output.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return None, f"its JSON output is not valid: {err['msg']}" + (
            f" ({where})" if where else ""
        )
    spec = out.hookSpecificOutput
    if spec is not None and spec.hookEventName not in (None, event):
        return None, f"its hookSpecificOutput is for {spec.hookEventName}, not {event}"
    return out, None


def read_reply(event: str, run: HookRun) -> Reply:
    """What ``run`` of a hook on ``event`` (Claude Code's name) says; see the module docstring."""
    if run.error is not None:
        return Reply(error=run.error)
    if run.timed_out:
        return Reply(
            error=f"timed out after {run.timeout:g}s: its process group was killed and its "
            "output discarded"
        )
    text = run.stdout.strip()
    output, problem = _parse(event, text)
    if run.exit_code == 2:
        reply = _from_output(event, output) if output is not None else Reply()
        reason = reply.reason if reply.block and reply.reason else capped(run.stderr.strip())
        return replace(reply, block=True, ask=False, reason=reason or "exit code 2")
    if problem is not None:
        return Reply(error=problem)
    if output is not None:
        return _from_output(event, output)
    if run.exit_code == 0:
        return Reply(context=capped(text)) if event in _PLAIN_CONTEXT and text else Reply()
    first = next((line for line in run.stderr.splitlines() if line.strip()), "")
    return Reply(error=f"exit code {run.exit_code}" + (f": {first.strip()}" if first else ""))
