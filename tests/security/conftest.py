"""Shared pieces of the security regression suite (issue 9): a house, a racer, the sandbox.

Tests that need the OS sandbox take the ``sandboxed`` fixture: it skips, naming why, on a
machine where bubblewrap cannot run, and fails under CI (which installs it), so the sandbox
tests can never silently stop running there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from _ops_support import Setup, make_setup
from comal.ops import Policy, SandboxStatus, sandbox_status

MACHINE: SandboxStatus = sandbox_status()


@pytest.fixture
def sandboxed() -> SandboxStatus:
    if not MACHINE.available:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the sandbox tests, but: {MACHINE.reason}")
        pytest.skip(f"the OS sandbox is not usable here: {MACHINE.reason}")
    return MACHINE


@pytest.fixture
def s(tmp_path: Path) -> Iterator[Setup]:
    setup = make_setup(tmp_path, policy=Policy.from_config({"mode": "trusted"}))
    yield setup
    setup.close()
