"""``comal -p PROMPT`` and ``comal --resume UUID [-p PROMPT]``: the agent, headless.

:func:`run_prompt` is called by the root callback. It loads the configuration (CFG-1), merges
the environment and the flags over it, opens the ledger, takes the session's lock (RES-2) and
runs the loop of :class:`comal.agent.Agent`: progress streams to stderr, the answer goes to
stdout (``--json``: ``{"session", "status", "answer", "turns", "receipts", "usage"}``). Calls
the OS sandbox stopped (none here, or bubblewrap failing to set up) are said plainly on stderr
after the run, one line per operation, apart from commands that ran and failed.

What the model or a tool wrote must not act on the terminal that shows it (an ESC sequence can
clear the screen, write the clipboard or retitle the window). Progress on stderr is for a
person, wherever it goes (a log read later with ``cat`` is a terminal too), so its control,
bidi and invisible characters are always shown escaped (:func:`comal.safe_text.safe`). The
answer on stdout is escaped the same way wherever stdout goes: a file or a pipe is read on a
terminal later (``cat out.txt``, ``less -R``), so a raw ``ESC [2J`` there clears a screen just
the same (issue 30). ``--json`` writes such characters as JSON escapes, always: the same value,
so a program that needs the model's exact text decodes it from there.

Exit codes: 0 when the session finished (finish_call passed) and no call was denied, 3 when
the run stopped at ``--max-turns`` (``--resume`` continues it), 4 when the task's budget is spent
(``budget_limited``: what remains is said), 5 when a hook stopped it, 6 when it finished but
calls were denied (``denied``, ``CALLS_DENIED``: a headless run never reports success for work
it was not allowed to do; the denied calls are named, with the rule of each), 2 on a coded error
(spend cap, repeated OUTPUT_LENGTH or CONTEXT_LENGTH, a locked session, bad configuration...),
whose code and message are printed (in the JSON too).

A resumed session keeps the model, mode, effort and engine it had (DRV-4), said once at start; a
flag changes them, and the change is recorded.

Flags left empty (``""``, ``0``, ``None``) mean "not given": the environment, the configuration
file and the defaults decide, in that order of precedence — except the model of a resumed
session, which is the one the session was started with unless ``--model`` names another.
"""

from __future__ import annotations

import io
import os
import re
import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from ..agent import Flags, RunResult
    from ..ledger import LedgerBackend, Scope
    from ..ops import SandboxStatus
    from ..providers import StreamEvent
from ..errors import ComalError
from ..safe_text import safe
from ._common import emit_json, ledger, said

__all__ = ["EXIT_CODES", "run_prompt"]

EXIT_CODES = {
    "finished": 0,
    "error": 2,
    "max_turns": 3,
    "budget_limited": 4,
    "stopped": 5,
    "denied": 6,
}
_STYLE = {"turn": "dim", "call": "cyan", "result": "green", "note": "dim", "warn": "yellow"}
_PREVIEW = 200
# A tool's output on stderr: its first lines, enough to follow the run; comal show and
# comal evidence have it whole.
_OUTPUT_LINES = 5
# How the Bash operation words a sandbox that never started the command (ops/_bash.py).
_BWRAP_SAID = re.compile(r"the sandbox could not start the command \((.*)\); nothing ran")


def _shown(text: str) -> str:
    """Model or tool text as a terminal may show it: CRLF a newline, the rest escaped."""
    return safe(text.replace("\r\n", "\n"))


class _Progress:
    """Progress on stderr: one line per event, streamed text as it arrives."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._mid_line = False
        self.streamed = ""  # the text streamed since the last model call began

    def say(self, kind: str, text: str) -> None:
        self._end_line()
        if kind == "output":
            self._output(text)
            return
        if kind == "turn":
            self.streamed = ""
        style = _STYLE.get(kind, "")
        if kind == "result" and any(w in text for w in (": error", ": denied", ": uncertain")):
            style = "red"
        # A warning is said whole: its end is what to do about it.
        text = _shown(text)
        line = text if len(text) <= _PREVIEW or kind == "warn" else text[: _PREVIEW - 1] + "…"
        prefix = {"call": "→ ", "result": "  ", "warn": "! "}.get(kind, "")
        self.console.print(f"[{style}]{escape(prefix + line)}[/]" if style else escape(line))

    def _output(self, text: str) -> None:
        lines = _shown(text.rstrip("\n")).split("\n") if text.strip() else ["(no output)"]
        for line in lines[:_OUTPUT_LINES]:
            cut = line if len(line) <= _PREVIEW else line[: _PREVIEW - 1] + "…"
            self.console.print(f"[dim]{escape('  │ ' + cut)}[/]")
        if len(lines) > _OUTPUT_LINES:
            self.console.print(f"[dim]  │ … {len(lines) - _OUTPUT_LINES} more line(s)[/]")

    def event(self, event: StreamEvent) -> None:
        from ..providers import StreamDone, TextDelta

        if isinstance(event, TextDelta):
            self.streamed += event.text
            shown = _shown(event.text)
            self.console.file.write(shown)
            self.console.file.flush()
            self._mid_line = not shown.endswith("\n")
        elif isinstance(event, StreamDone):
            self._end_line()

    def _end_line(self) -> None:
        if self._mid_line:
            self.console.file.write("\n")
            self._mid_line = False


def run_prompt(
    prompt: str | None,
    flags: Flags,
    *,
    resume: str | None,
    latest: bool = False,
    as_json: bool = False,
) -> int:
    """Run (or resume) a session headless; returns the exit code (see the module docstring)."""
    from ..agent import RunResult, Runtime, check_prompt

    progress = _Progress(Console(stderr=True, highlight=False))
    session: str | None = None
    try:
        check_prompt(prompt)  # before any note, and before a ledger is made for nothing
        with ledger(create=True) as led:
            runtime = Runtime.open(led, flags, resume=resume, latest=latest)
            with runtime.closing():
                for note in runtime.notes:
                    progress.say("note", note)
                if runtime.host.mode == "ask":
                    # Headless: no approver, so a call the policy would ask about is denied,
                    # and the denial says so (the model reads it in the result).
                    progress.say(
                        "note",
                        "mode ask without an approver: calls that need approval are denied "
                        "(allow them with --allow RULE, or use --mode trusted)",
                    )
                box = runtime.sandbox_status()
                progress.say(
                    "note" if box.active else "warn",
                    f"sandbox: {'active' if box.active else 'NOT active'} ({box.reason})",
                )
                session = runtime.scope.session if runtime.scope else None
                where = session or "new session"
                progress.say("note", f"{where} · {runtime.spec} · {runtime.workspace.root}")
                try:
                    result = runtime.run(prompt, say=progress.say, on_event=progress.event)
                finally:
                    session = runtime.scope.session if runtime.scope else session
                for line in _sandbox_failures(result, box, led, runtime.scope):
                    progress.say("warn", line)
    except ComalError as exc:
        error = {"code": exc.code, "message": said(exc)}
        result = RunResult(session or "", "error", "", 0, error=error)
    result = result.denying()
    if result.error is not None:
        progress.say("warn", f"[{result.error['code']}] {result.error['message']}")
    _report(result, as_json, progress)
    return EXIT_CODES[result.status]


def _sandbox_failures(
    result: RunResult, box: SandboxStatus, led: LedgerBackend, scope: Scope | None
) -> list[str]:
    """One plain line per operation whose calls the sandbox stopped, apart from the commands'
    own failures: refused because there is no sandbox here, or never started because
    bubblewrap could not set it up (bwrap's own words, from the stored result)."""
    from ..ops import SandboxUnavailable

    denied: dict[str, int] = {}
    failed: dict[str, tuple[int, str]] = {}
    for receipt in result.receipts:
        op = receipt.operation
        if receipt.judgment.get("rule") == "sandbox:unavailable":
            denied[op] = denied.get(op, 0) + 1
        elif receipt.observations.get("error") == SandboxUnavailable.code:
            entry = None
            if scope is not None and receipt.result_entry is not None:
                entry = led.entry(scope, receipt.result_entry)
            said = entry.message.tool_result if entry is not None else None
            why = _BWRAP_SAID.search(said.text if said is not None else "")
            count, detail = failed.get(op, (0, ""))
            failed[op] = (count + 1, detail or (why.group(1) if why else ""))
    lines = [
        f"{op} denied{_times(n)}: the OS sandbox is not available here ({box.reason}); nothing "
        "ran. To run without it, the operator may set sandbox.allow_unsandboxed = true"
        for op, n in denied.items()
    ]
    lines += [
        f"{op} did not run{_times(n)}: the sandbox (bubblewrap) failed to set up"
        + (f" ({detail})" if detail else "")
        + "; the command itself never started, so this is not its own failure"
        for op, (n, detail) in failed.items()
    ]
    return lines


def _times(n: int) -> str:
    return f" ({n} calls)" if n > 1 else ""


def _same_destination() -> bool:
    """stdout and stderr reach the same place: one terminal, or one pipe or file (``2>&1``,
    a capture of both), where the streamed answer was already said. Apart (a pipe or a file
    on one of them only), each keeps its own copy."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # replaced streams (tests)
        return False
    if sys.stdout.isatty() and sys.stderr.isatty():
        return (out.st_rdev, out.st_ino) == (err.st_rdev, err.st_ino)
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


def _report(result: RunResult, as_json: bool, progress: _Progress) -> None:
    if as_json:
        data = result.as_dict()
        value = (
            {k: data[k] for k in ("session", "status", "answer", "turns", "receipts", "usage")}
            | ({"error": data["error"]} if "error" in data else {})
            | ({"blocked": data["blocked"]} if data["blocked"] else {})
        )
        emit_json(value)  # such characters as JSON escapes: the same value
        return
    # Streamed to stderr already, where stdout goes too: the same words, once.
    once = _same_destination() and progress.streamed.strip() == (result.answer or "").strip()
    if result.answer and result.status != "error" and not once:
        sys.stdout.write(_shown(result.answer.rstrip("\n")) + "\n")
        sys.stdout.flush()
    if result.blocked:
        progress.say("warn", f"blocked (uncertain, not repeated): {', '.join(result.blocked)}")
    if result.status == "max_turns":
        progress.say("warn", f"not finished: resume with `comal --resume {result.session}`")
