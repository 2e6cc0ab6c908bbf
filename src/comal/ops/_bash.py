"""The native shell: ``bash -c`` in the OS sandbox, bounded output, nothing outlives the call.

Where the sandbox is active (:mod:`._sandbox`), the command runs inside bubblewrap with its own
PID namespace: when the shell exits, or its time runs out, every process it started dies with
it, whether it was backgrounded, ``nohup``-ed, double-forked or ``setsid``-ed. Where the
operator opted out of the sandbox, the command leads a new process group that is killed with
SIGKILL at the end, and a sweep kills every process still carrying the call's marker
variable; a process that leaves the group *and* clears its environment can still escape there
— the residual risk of running unsandboxed.

Time is measured on the process, not on its pipes: a shell that closes its stdout and stderr
is still killed at its timeout. stdout and stderr each go to a bounded :class:`Spool` (4 MiB by
default, ``limits.output_cap``): the whole stream up to the cap, else its head and tail with
the exact number of bytes dropped between them. The receipt records sha256 and size of every
byte the process wrote, how many were kept and dropped, and whether decoding was lossy. Shell
effects cannot be observed, so the receipt says ``effects: unknown`` (OPS-5); there is no
postcondition adapter, so a Bash call a crash interrupted stays uncertain (RES-4).

A person's stop (:class:`~comal.ops.StopSignal`, the TUI's Escape, the page's Interrupt) ends
the command the way its timeout does — the process group killed, the stray processes swept —
within a twentieth of a second; the result keeps the output so far and says who stopped it
after how long, and the receipt's status is ``interrupted`` (its effects stay unknown: it is
set aside, never repeated on its own). What the command writes reaches the host as it comes
(``CallContext.on_output``, :class:`~comal.ops.OutputStream`).
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from ..messages import sha256_hex
from ._errors import MemoryCapExceeded, SandboxUnavailable
from ._model import CallContext, Effect, ToolOutput
from ._operation import Operation
from ._running import OnOutput, OutputStream, StopSignal, interrupted_note
from ._sandbox import Sandbox, out_of_memory, scrub_env
from ._spool import DEFAULT_OUTPUT_CAP, Captured, Spool

__all__ = ["BashArgs", "BashRun", "bash_operation", "run_bash"]

# How long to keep reading after the end: only an escaped (unsandboxed) process holds the pipes.
_GRACE = 2.0
_CHUNK = 1 << 16
_MARKER = "COMAL_CALL_MARKER"
_SWEEPS = 5


class BashArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    command: str = Field(min_length=1, description="The bash command line to run.")
    timeout: float | None = Field(
        None, gt=0, le=86_400, description="Seconds before the command is killed (capped)."
    )


@dataclass(frozen=True, slots=True)
class BashRun:
    """One run. ``stdout``/``stderr`` are the kept bytes (head then tail); ``out``/``err``
    say what was kept and dropped of each stream; ``interrupted``: a person stopped it."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None
    timed_out: bool
    group_killed: bool
    seconds: float
    out: Captured | None = None
    err: Captured | None = None
    sandboxed: bool = False
    sandbox_error: str | None = None
    swept: int = 0
    interrupted: bool = False


def _kill_group(pgid: int) -> bool:
    """SIGKILL every process left in the group; True if there was one to kill."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _sweep(marker: str) -> int:
    """SIGKILL every process whose environment carries ``marker``; how many were killed."""
    needle = f"{_MARKER}={marker}\0".encode()
    killed = 0
    for _ in range(_SWEEPS):  # a process may fork while the sweep runs; sweep until quiet
        found = 0
        try:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        except OSError:
            return killed
        for pid in pids:
            if pid == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    if needle not in fh.read():
                        continue
                os.kill(pid, signal.SIGKILL)
                found += 1
            except (OSError, ValueError):
                continue
        killed += found
        if not found:
            break
    return killed


def run_bash(
    command: str,
    *,
    cwd: Path,
    timeout: float,
    sandbox: Sandbox | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    env: Mapping[str, str] | None = None,
    stdin: IO[bytes] | None = None,
    stop: StopSignal | None = None,
    on_output: OnOutput | None = None,
) -> BashRun:
    """Run ``command``; inside ``sandbox`` when it is given and active. ``stdin``: a file the
    command reads (a hook's event); none by default. ``stop`` ends it as its timeout would;
    ``on_output(stream, text)`` hears what it writes as it comes."""
    start = time.monotonic()
    marker = secrets.token_hex(12)
    keep = sandbox.policy.env_keep if sandbox is not None else ()
    child_env = scrub_env(os.environ if env is None else env, keep)
    child_env[_MARKER] = marker
    argv = ["bash", "-c", command]
    fds: list[int] = []
    status_read: int | None = None
    sandboxed = sandbox is not None and sandbox.active
    if sandbox is not None and sandboxed:
        argv, fds = sandbox.argv(argv, cwd)
        status_read, status_write = os.pipe()
        fds.append(status_write)
        argv[1:1] = ["--json-status-fd", str(status_write)]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=fds,
            env=child_env,
        )
    finally:
        for fd in fds:
            os.close(fd)
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    spools = {out_fd: Spool(output_cap), err_fd: Spool(output_cap)}
    live = None
    if on_output is not None:
        live = _Live(OutputStream(on_output), {out_fd: "stdout", err_fd: "stderr"})
    ended = _supervise(proc, _Pipes(spools, live), start + timeout, marker, sandboxed, stop)
    timed_out, group_killed, swept, interrupted = ended
    if live is not None:
        live.stream.close()
    proc.stdout.close()
    proc.stderr.close()
    code = proc.returncode
    sandbox_error = None
    if status_read is not None:
        sandbox_error = _sandbox_failure(status_read, spools[err_fd], code)
    out = spools[out_fd].finish()
    err = spools[err_fd].finish()
    return BashRun(
        out.data,
        err.data,
        None if timed_out or interrupted else code,
        timed_out,
        group_killed,
        time.monotonic() - start,
        out,
        err,
        sandboxed,
        sandbox_error,
        swept,
        interrupted,
    )


@dataclass(frozen=True, slots=True)
class _Live:
    """The output on its way to the host, and which pipe is which stream."""

    stream: OutputStream
    names: dict[int, str]


@dataclass(frozen=True, slots=True)
class _Pipes:
    spools: dict[int, Spool]
    live: _Live | None = None

    def write(self, fd: int, data: bytes) -> None:
        self.spools[fd].write(data)
        if self.live is not None:
            self.live.stream.write(self.live.names[fd], data)

    def tick(self) -> None:
        if self.live is not None:
            self.live.stream.tick()


# How often a command with quiet pipes is looked at: its deadline and a person's stop.
_LOOK_S = 0.05


def _supervise(
    proc: subprocess.Popen[bytes],
    pipes: _Pipes,
    deadline: float,
    marker: str,
    sandboxed: bool,
    stop: StopSignal | None = None,
) -> tuple[bool, bool, int, bool]:
    """Read the shell's pipes until it ends, ``deadline`` passes or ``stop`` is set, then kill
    what it left running; (timed out, its process group was killed, stray processes swept by
    marker, stopped)."""
    assert proc.stdout is not None and proc.stderr is not None
    timed_out = interrupted = False
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        # Run until the process ends, its time is up or a person stops it, whatever its
        # pipes do.
        while proc.poll() is None:
            if stop is not None and stop.is_set():
                interrupted = True
                break
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if not sel.get_map():
                try:
                    proc.wait(timeout=min(left, _LOOK_S))
                except subprocess.TimeoutExpired:
                    pass
                continue
            _pump(sel, pipes, min(_LOOK_S, left))
            pipes.tick()
        # The shell is done or out of time: whatever it left running dies now.
        group_killed = _kill_group(proc.pid)
        swept = 0 if sandboxed else _sweep(marker)
        try:
            proc.wait(timeout=_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        until = time.monotonic() + _GRACE
        while sel.get_map() and time.monotonic() < until:
            _pump(sel, pipes, 0.05)
    return timed_out, group_killed, swept, interrupted


def _pump(sel: selectors.BaseSelector, pipes: _Pipes, wait: float) -> None:
    for key, _ in sel.select(timeout=wait):
        try:
            data = os.read(key.fd, _CHUNK)
        except OSError:
            data = b""
        if data:
            pipes.write(key.fd, data)
        else:
            sel.unregister(key.fileobj)


def _sandbox_failure(status_fd: int, err: Spool, code: int | None) -> str | None:
    """bwrap's own complaint when it never started the command (``None`` when it did)."""
    try:
        with os.fdopen(status_fd, "rb") as fh:
            report = fh.read(1 << 16)
    except OSError:
        report = b""
    for line in report.splitlines():
        try:
            if "child-pid" in json.loads(line):
                return None
        except (ValueError, TypeError):
            continue
    tail = err.finish().data.decode("utf-8", "replace").strip().splitlines()
    return tail[-1] if tail else f"bubblewrap exited with {code} before starting the command"


def _decode(data: bytes) -> tuple[str, bool]:
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), True


def _render(name: str, cap: Captured) -> tuple[str, bool, bool]:
    head, lossy_head = _decode(cap.head)
    if not cap.dropped:
        text, lossy = _decode(cap.data)
        return text, lossy, False
    tail, lossy_tail = _decode(cap.tail)
    note = (
        f"\n[{cap.dropped:,} bytes of {name} dropped here: it wrote {cap.size:,} bytes, over the "
        f"output cap; kept are the first {len(cap.head):,} and the last {len(cap.tail):,}]\n"
    )
    return head + note + tail, lossy_head or lossy_tail, True


def _bytes_info(cap: Captured, lossy: bool) -> dict[str, Any]:
    info: dict[str, Any] = {
        "sha256": cap.sha256,
        "size": cap.size,
        "lossy": lossy,
        "kept": cap.kept,
        "dropped": cap.dropped,
    }
    if cap.dropped:
        info["kept_sha256"] = sha256_hex(cap.data)
    return info


def _bash(args: BashArgs, ctx: CallContext) -> ToolOutput:
    cwd = ctx.need_workspace().root
    sandbox = ctx.sandbox
    if sandbox is not None and sandbox.policy.enabled and not sandbox.status.available:
        if not (sandbox.policy.allow_unsandboxed or ctx.approved):
            raise SandboxUnavailable(
                f"Bash needs the OS sandbox and this machine has none ({sandbox.status.reason});"
                " nothing ran. Install bubblewrap, or the operator may set "
                "sandbox.allow_unsandboxed"
            )
    run = run_bash(
        args.command,
        cwd=cwd,
        timeout=ctx.timeout,
        sandbox=sandbox,
        output_cap=ctx.output_cap,
        stop=ctx.stop,
        on_output=ctx.on_output,
    )
    if run.sandbox_error is not None:
        raise SandboxUnavailable(
            f"the sandbox could not start the command ({run.sandbox_error}); nothing ran"
        )
    assert run.out is not None and run.err is not None
    out, out_lossy, out_cut = _render("stdout", run.out)
    err, err_lossy, err_cut = _render("stderr", run.err)
    parts = [out]
    if err:
        parts.append(("\n" if out and not out.endswith("\n") else "") + "[stderr]\n" + err)
    text = "".join(parts)
    notes: list[str] = []
    for name, lossy, cap in (("stdout", out_lossy, run.out), ("stderr", err_lossy, run.err)):
        if lossy:
            notes.append(
                f"[{name} was not valid UTF-8: undecodable bytes are shown as U+FFFD; the exact "
                f"{cap.size:,} bytes have sha256 {cap.sha256}]"
            )
    memory_cap = sandbox.policy.memory_cap if sandbox is not None and run.sandboxed else None
    ended = not (run.timed_out or run.interrupted)
    exhausted = memory_cap is not None and ended and run.exit_code != 0
    exhausted = exhausted and out_of_memory(run.err.data[-(1 << 16) :])
    if exhausted:
        notes.append(
            f"[out of memory: the sandbox caps each process at {memory_cap:,} bytes of address "
            "space (sandbox.memory_cap) [MEMORY_CAP]]"
        )
    if run.interrupted and ctx.stop is not None:
        what = "the process group was killed; its output so far is above"
        notes.append(interrupted_note(ctx.stop, run.seconds, what))
    elif run.timed_out:
        notes.append(f"[timed out after {ctx.timeout:g}s: the process group was killed]")
    else:
        notes.append(f"[exit code {run.exit_code}]")
    text += ("\n" if text and not text.endswith("\n") else "") + "\n".join(notes)
    seen: dict[str, Any] = {
        "effects": "unknown",
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "interrupted": run.interrupted,
        "timeout": ctx.timeout,
        "process_group_killed": run.group_killed,
        "seconds": round(run.seconds, 3),
        "stdout": _bytes_info(run.out, out_lossy),
        "stderr": _bytes_info(run.err, err_lossy),
        "output_cap": ctx.output_cap,
        "truncated": out_cut or err_cut,
        "sandbox": _sandbox_seen(sandbox, run),
    }
    if exhausted:
        seen["error"] = MemoryCapExceeded.code
    if run.interrupted and ctx.stop is not None:
        seen["interrupted_by"] = ctx.stop.by
        seen["reason"] = f"interrupted by {ctx.stop.by} while it ran; its effects are unknown"
    return ToolOutput(
        text,
        is_error=run.timed_out or run.interrupted or run.exit_code != 0,
        timed_out=run.timed_out,
        observations=seen,
        interrupted=run.interrupted,
    )


def _sandbox_seen(sandbox: Sandbox | None, run: BashRun) -> dict[str, Any]:
    if not run.sandboxed or sandbox is None:
        why = "no sandbox was configured" if sandbox is None else sandbox.status.reason
        return {"active": False, "reason": why, "swept": run.swept}
    return {
        "active": True,
        "backend": sandbox.status.backend,
        "network": sandbox.policy.network,
        "memory_cap": sandbox.policy.memory_cap,
        "seccomp": sandbox.seccomp()[0] is not None,
        "unix_sockets": sandbox.policy.unix_sockets,
        "unprotected": sandbox.unprotected,
    }


def _command(args: BashArgs) -> str:
    return args.command


def bash_operation() -> Operation:
    return Operation(
        "Bash",
        "Run a bash command in the workspace root, inside an OS sandbox: the workspace is "
        "writable, the rest read-only, no network unless allowed. Large output is stored and "
        "referenced; past the output cap its middle is dropped and counted. Every process the "
        "command started is killed on timeout and when it exits.",
        BashArgs,
        _bash,
        effects=(Effect("exec"),),
        subject=_command,
        subject_kind="command",
        sandboxed=True,
    )
