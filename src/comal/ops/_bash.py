"""The native shell: ``bash -c`` in its own process group, output captured whole.

The command runs with ``start_new_session=True``, so it leads a new process group. When the
shell exits, and when its time runs out, the whole group is killed with SIGKILL: a child that
outlives its parent (``sleep 600 &``) dies with the call instead of holding the output pipes or
running on unjudged. (A process that deliberately leaves the group with ``setsid`` escapes; the
reader then stops waiting for it after a short grace.)

stdout and stderr are read whole, however large. The inline text decodes them as UTF-8 with
``errors="replace"``; the receipt records the sha256 and size of the exact bytes, and whether
decoding was lossy. Shell effects cannot be observed, so the receipt says ``effects: unknown``
(OPS-5); there is no postcondition adapter, so an interrupted Bash call stays uncertain (RES-4).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..messages import sha256_hex
from ._model import CallContext, Effect, ToolOutput
from ._operation import Operation

__all__ = ["BashArgs", "BashRun", "bash_operation", "run_bash"]

# How long to keep reading after the group was killed: only an escaped process holds the pipes.
_GRACE = 2.0
_CHUNK = 1 << 16


class BashArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    command: str = Field(min_length=1, description="The bash command line to run.")
    timeout: float | None = Field(
        None, gt=0, le=86_400, description="Seconds before the command is killed (capped)."
    )


@dataclass(frozen=True, slots=True)
class BashRun:
    stdout: bytes
    stderr: bytes
    exit_code: int | None
    timed_out: bool
    group_killed: bool
    seconds: float


def _kill_group(pgid: int) -> bool:
    """SIGKILL every process left in the group; True if there was one to kill."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def run_bash(command: str, *, cwd: Path, timeout: float) -> BashRun:
    start = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    deadline = start + timeout
    timed_out = False
    group_killed = False
    killed_at: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            moment = time.monotonic()
            if killed_at is None:
                if proc.poll() is not None:
                    # The shell is done: whatever it left running in its group dies with it.
                    group_killed = _kill_group(proc.pid)
                    killed_at = moment
                elif moment >= deadline:
                    timed_out = True
                    group_killed = _kill_group(proc.pid)
                    killed_at = moment
            elif moment - killed_at > _GRACE:
                break
            wait = 0.05 if killed_at is not None else max(0.0, min(0.05, deadline - moment))
            for key, _ in sel.select(timeout=wait):
                data = os.read(key.fd, _CHUNK)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fileobj)
    proc.stdout.close()
    proc.stderr.close()
    code = proc.wait()
    return BashRun(
        b"".join(chunks[out_fd]),
        b"".join(chunks[err_fd]),
        None if timed_out else code,
        timed_out,
        group_killed,
        time.monotonic() - start,
    )


def _decode(data: bytes) -> tuple[str, bool]:
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), True


def _bytes_info(data: bytes, lossy: bool) -> dict[str, Any]:
    return {"sha256": sha256_hex(data), "size": len(data), "lossy": lossy}


def _bash(args: BashArgs, ctx: CallContext) -> ToolOutput:
    cwd = ctx.need_workspace().root
    run = run_bash(args.command, cwd=cwd, timeout=ctx.timeout)
    out, out_lossy = _decode(run.stdout)
    err, err_lossy = _decode(run.stderr)
    parts = [out]
    if err:
        parts.append(("\n" if out and not out.endswith("\n") else "") + "[stderr]\n" + err)
    text = "".join(parts)
    notes: list[str] = []
    for name, lossy, data in (("stdout", out_lossy, run.stdout), ("stderr", err_lossy, run.stderr)):
        if lossy:
            notes.append(
                f"[{name} was not valid UTF-8: undecodable bytes are shown as U+FFFD; the exact "
                f"{len(data):,} bytes have sha256 {sha256_hex(data)}]"
            )
    if run.timed_out:
        notes.append(f"[timed out after {ctx.timeout:g}s: the process group was killed]")
    else:
        notes.append(f"[exit code {run.exit_code}]")
    text += ("\n" if text and not text.endswith("\n") else "") + "\n".join(notes)
    seen = {
        "effects": "unknown",
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "timeout": ctx.timeout,
        "process_group_killed": run.group_killed,
        "seconds": round(run.seconds, 3),
        "stdout": _bytes_info(run.stdout, out_lossy),
        "stderr": _bytes_info(run.stderr, err_lossy),
    }
    return ToolOutput(
        text,
        is_error=run.timed_out or run.exit_code != 0,
        timed_out=run.timed_out,
        observations=seen,
    )


def _command(args: BashArgs) -> str:
    return args.command


def bash_operation() -> Operation:
    return Operation(
        "Bash",
        "Run a bash command in the workspace root. Output is returned whole (large output is "
        "stored and referenced); the whole process group is killed on timeout and when the "
        "command exits.",
        BashArgs,
        _bash,
        effects=(Effect("exec"),),
        subject=_command,
        subject_kind="command",
    )
