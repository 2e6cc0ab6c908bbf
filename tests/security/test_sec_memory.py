"""Issue 9 §3: a sandboxed process has a memory cap (``sandbox.memory_cap``, ``RLIMIT_AS``).

An allocation past the cap fails inside the tool, which reports it; the receipt keeps the
output and carries the code ``MEMORY_CAP``. Address space is *mapped*, not touched, where the
test only needs to cross the cap (``mmap``), so no test really uses gigabytes of memory.
"""

# covers: OPS-5, OPS-7

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from _ops_support import ANA, Setup, call, make_setup
from comal.errors import InputError
from comal.ops import DEFAULT_MEMORY_CAP, Policy, SandboxStatus, out_of_memory

# The machine's Python, not a virtual environment's that may live under the hidden /tmp.
PYTHON = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}")


def bash(tmp_path: Path, command: str, sandbox: Any = None) -> tuple[str, dict[str, Any], str]:
    config: dict[str, Any] = {"mode": "trusted"}
    if sandbox is not None:
        config["sandbox"] = sandbox
    s: Setup = make_setup(tmp_path, policy=Policy.from_config(config))
    outcome, receipt = s.house.handle(
        call("Bash", {"command": command, "timeout": 60}), ANA, surface="cli"
    )
    s.close()
    return outcome.result.text, dict(receipt.observations), receipt.status


def mapping(gib: int) -> str:
    return f"{PYTHON} -I -c 'import mmap; mmap.mmap(-1, {gib} << 30); print(\"mapped\")'"


def test_the_default_cap_is_two_gib_and_crossing_it_is_a_coded_error(
    tmp_path: Path, sandboxed: SandboxStatus
) -> None:
    assert DEFAULT_MEMORY_CAP == 2 << 30
    text, seen, status = bash(tmp_path, mapping(3))
    assert status == "error" and seen["error"] == "MEMORY_CAP"
    assert seen["sandbox"]["memory_cap"] == 2 << 30
    assert "mapped" not in text and "Cannot allocate memory" in text
    assert "[MEMORY_CAP]" in text and "sandbox.memory_cap" in text
    # The same mapping under no cap succeeds: it is the cap that refused it.
    text, seen, status = bash(tmp_path, mapping(3), {"memory_cap": "off"})
    assert status == "ok" and "mapped" in text and "error" not in seen
    assert seen["sandbox"]["memory_cap"] is None


def test_the_issue_allocation_fails_inside_the_tool(
    tmp_path: Path, sandboxed: SandboxStatus
) -> None:
    text, seen, status = bash(tmp_path, f'{PYTHON} -I -c "x=bytearray(10**11)"; echo after')
    assert "MemoryError" in text and "after" in text  # the shell went on; the house too
    # The shell's own exit is 0 after "echo after": a failure it survived is no error.
    assert status == "ok" and "error" not in seen
    text, seen, status = bash(tmp_path, f'{PYTHON} -I -c "x=bytearray(10**11)"')
    assert status == "error" and seen["error"] == "MEMORY_CAP" and seen["exit_code"] == 1


def test_a_configured_cap_holds_and_work_under_it_runs(
    tmp_path: Path, sandboxed: SandboxStatus
) -> None:
    box = {"memory_cap": "256MiB"}
    small = f"{PYTHON} -I -c 'x = bytearray(32 << 20); print(len(x))'"
    text, seen, status = bash(tmp_path, small, box)
    assert status == "ok" and str(32 << 20) in text
    text, seen, status = bash(tmp_path, mapping(1), box)
    assert status == "error" and seen["error"] == "MEMORY_CAP"
    assert seen["sandbox"]["memory_cap"] == 256 << 20
    # A process cannot lift its own cap: the hard limit is the cap too.
    lift = "prlimit --pid $$ --as=unlimited && echo lifted"
    text, seen, status = bash(tmp_path, lift, box)
    assert "lifted" not in text and status == "error"


def test_an_unrelated_failure_is_not_called_a_memory_cap(
    tmp_path: Path, sandboxed: SandboxStatus
) -> None:
    text, seen, status = bash(tmp_path, "echo nope >&2; exit 3")
    assert status == "error" and "error" not in seen and "MEMORY_CAP" not in text


@pytest.mark.parametrize(
    "stderr",
    [
        b"Traceback (most recent call last):\nMemoryError\n",
        b"mmap: [Errno 12] Cannot allocate memory\n",
        b"terminate called after throwing an instance of 'std::bad_alloc'\n",
        b"bash: xmalloc: cannot allocate 4294967296 bytes\n",
        b"fatal error: runtime: out of memory\n",
        b"memory allocation of 8589934592 bytes failed\n",
        b"FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n",
        b"Error occurred during initialization of VM\nCould not allocate compressed class space",
    ],
)
def test_the_words_of_an_allocation_failure(stderr: bytes) -> None:
    assert out_of_memory(stderr)
    assert not out_of_memory(b"error: file not found\n")


@pytest.mark.parametrize(
    ("value", "cap"),
    [("2GiB", 2 << 30), ("64MiB", 64 << 20), (1 << 40, 1 << 40), ("off", None), (None, None)],
)
def test_the_cap_setting(value: Any, cap: int | None) -> None:
    assert Policy.from_config({"sandbox": {"memory_cap": value}}).sandbox.memory_cap == cap
    assert Policy.from_config({}).sandbox.memory_cap == DEFAULT_MEMORY_CAP


@pytest.mark.parametrize("value", ["1k", (1 << 40) + 1, -1, "lots", 0, True])
def test_a_cap_out_of_range_is_refused_naming_the_key(value: Any) -> None:
    with pytest.raises(InputError) as err:
        Policy.from_config({"sandbox": {"memory_cap": value}})
    assert err.value.code == "INPUT_ERROR" and err.value.field == "sandbox.memory_cap"
