"""What opening a session needs besides the runtime itself: a prompt that says something, the
workspace, the sessions one may continue (the instruction files are :mod:`._instructions`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..ledger import LedgerBackend, SessionInfo
from ..ops import Workspace

__all__ = [
    "check_prompt",
    "latest_session",
    "open_workspace",
    "resumable",
]


def check_prompt(prompt: str | None) -> None:
    """A prompt must say something (``None``: no new prompt, a resume)."""
    if prompt is not None and not prompt.strip():
        raise UserError(
            "the prompt is empty: give -p TEXT (or -p - to read it from stdin); to continue "
            "a session without a new prompt, give --resume ID with -p alone"
        )


def open_workspace(root: Path) -> Workspace:
    path = Path(root).expanduser()
    if not path.is_dir():
        raise UserError(
            f"the workspace {path} is not a directory (it is gone, or the path is wrong); pass "
            "--workspace DIR"
        )
    return Workspace(path)


def resumable(ledger: LedgerBackend, tenant: str, agent: str) -> list[SessionInfo]:
    """The sessions of ``tenant``/``agent`` one may continue (not a sub-agent's), newest
    first: what ``-c`` takes the first of and the TUI's ``/resume`` offers."""
    sessions = [s for s in ledger.sessions(tenant=tenant, agent=agent) if s.parent is None]
    return sorted(sessions, key=lambda s: (s.created_at, s.id), reverse=True)


def latest_session(ledger: LedgerBackend, tenant: str, agent: str) -> SessionInfo:
    sessions = resumable(ledger, tenant, agent)
    if not sessions:
        raise UserError(f"no session to continue for {tenant}/{agent}; start one with -p")
    return sessions[0]
