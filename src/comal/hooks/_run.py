"""One hook command, run as Bash runs: ``bash -c`` in the house's sandbox, the workspace its
working directory, the event as JSON on stdin, bounded in time and in output.

The sandbox is the one the session's Bash calls get (:class:`~comal.ops.Sandbox`): the
workspace writable, the rest read-only, comal's configuration and ledger masked, no network
unless the operator allows it, its own PID namespace, so at the timeout every process the hook
started dies with it (where the operator opted out of the sandbox, the process group is
killed). Where the sandbox is wanted and cannot run, the hook does not run either (unless the
operator allows running without it, ``sandbox.allow_unsandboxed``): a hook is a command like
any other. The environment is Bash's (secrets taken out) plus ``CLAUDE_PROJECT_DIR``.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from ..ops import Sandbox, run_bash
from ..ops._spool import Captured

__all__ = ["OUTPUT_CAP", "RECORD_CHARS", "HookRun", "cut", "hook_sandbox", "run_hook"]

# Bytes kept of each stream: a hook's answer is a line of JSON or a reason, never megabytes.
OUTPUT_CAP: Final = 1 << 20
# Characters of each stream the ledger keeps of a run.
RECORD_CHARS: Final = 2_000


@dataclass(frozen=True, slots=True)
class HookRun:
    """What one run did: ``exit_code`` (``None`` when it timed out or never started), its
    output decoded, and ``error`` when it could not run at all."""

    command: str
    exit_code: int | None
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str
    timeout: float
    sandboxed: bool = False
    dropped: int = 0
    error: str | None = None

    def record(self) -> dict[str, Any]:
        """The run as the ledger keeps it: each stream cut to :data:`RECORD_CHARS`."""
        out: dict[str, Any] = {
            "command": self.command,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "timeout": self.timeout,
            "seconds": round(self.seconds, 3),
            "stdout": cut(self.stdout),
            "stderr": cut(self.stderr),
            "sandboxed": self.sandboxed,
        }
        if self.dropped:
            out["output_dropped_bytes"] = self.dropped
        if self.error is not None:
            out["error"] = self.error
        return out


def cut(text: str) -> str:
    if len(text) <= RECORD_CHARS:
        return text
    return f"{text[:RECORD_CHARS]}… [{len(text) - RECORD_CHARS:,} more characters]"


def _decode(cap: Captured | None, data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    if cap is not None and cap.dropped:
        head = cap.head.decode("utf-8", "replace")
        tail = cap.tail.decode("utf-8", "replace")
        text = f"{head}\n[{cap.dropped:,} bytes dropped]\n{tail}"
    return text


def _refused(sandbox: Sandbox | None) -> str | None:
    """Why the hook may not run here: the sandbox is wanted and cannot run."""
    if sandbox is None or not sandbox.policy.enabled or sandbox.policy.allow_unsandboxed:
        return None
    status = sandbox.status
    if status.available:
        return None
    return f"the OS sandbox hooks run in is not available here ({status.reason}); nothing ran"


def hook_sandbox(sandbox: Sandbox | None, readable: tuple[Path, ...]) -> Sandbox | None:
    """The house's sandbox for hooks: the same, plus ``readable`` paths outside the
    workspace the sandbox would hide (the transcript, under the private ``/tmp``). The
    machine is probed once, here, before hooks run side by side."""
    if sandbox is None:
        return None
    sandbox.status  # noqa: B018  # probe now: the copy below shares what was found
    box = replace(sandbox, readable=(*sandbox.readable, *readable))
    box.seccomp()
    return box


def run_hook(
    command: str,
    event: dict[str, Any],
    *,
    cwd: Path,
    timeout: float,
    sandbox: Sandbox | None,
) -> HookRun:
    """Run ``command`` with ``event`` as JSON on stdin (see the module docstring)."""
    refused = _refused(sandbox)
    if refused is not None:
        return HookRun(command, None, False, 0.0, "", "", timeout, error=refused)
    env = dict(os.environ)
    env["CLAUDE_PROJECT_DIR"] = str(cwd)
    with tempfile.TemporaryFile() as stdin:
        # A file, not a pipe: a hook that never reads its input cannot stall the writer.
        stdin.write(json.dumps(event, ensure_ascii=False).encode("utf-8"))
        stdin.seek(0)
        try:
            run = run_bash(
                command,
                cwd=cwd,
                timeout=timeout,
                sandbox=sandbox,
                output_cap=OUTPUT_CAP,
                env=env,
                stdin=stdin,
            )
        except OSError as exc:
            return HookRun(
                command, None, False, 0.0, "", "", timeout, error=f"did not start: {exc}"
            )
    dropped = sum(c.dropped for c in (run.out, run.err) if c is not None)
    error = None
    if run.sandbox_error is not None:
        error = f"the sandbox could not start the hook ({run.sandbox_error}); nothing ran"
    return HookRun(
        command,
        None if error else run.exit_code,
        run.timed_out,
        run.seconds,
        _decode(run.out, run.stdout),
        _decode(run.err, run.stderr),
        timeout,
        run.sandboxed,
        dropped,
        error,
    )
