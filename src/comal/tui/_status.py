"""What the TUI says of the session itself: its status line, and ``/mode``, ``/effort`` or
``/name`` given alone."""

from __future__ import annotations

from ..agent import Runtime, context_report
from ..agent._transcript import board_note as shared_board_note
from ..errors import ComalError
from ..ops import MODES

__all__ = ["control_now", "status_line"]


def status_line(rt: Runtime, *, busy: bool, turn_note: str) -> str:
    """One line: the context gauge once, the engine, the model, the permission mode (and the
    effort when one is set), then whether the agent works and the board."""
    state = f"working…{turn_note}" if busy else "ready"
    effort = f" · effort {rt.host.effort}" if rt.host.effort else ""
    settings = f"{rt.spec or 'model ?'} · mode {rt.host.mode}{effort}"
    if rt.scope is None:
        return f"new session · {settings} · {state}"
    try:
        # The same function /context runs, without a receipt per refresh.
        report = context_report(rt, rt.proposer().preview())
    except ComalError as exc:
        return f"[{exc.code}] · {settings} · {state}"
    mark = "" if report["measured"] else " ~"
    return (
        f"ctx {report['utilization']:.0%}{mark} · {report['input']:,}/{report['window']:,} "
        f"tokens · {report['engine']} · {settings} · {state}{board_note(rt)}"
    )


def board_note(rt: Runtime) -> str:
    """The board in the status line (BRD-2); /state shows it whole."""
    shown = shared_board_note(rt.ledger, rt.scope)
    return f" · {shown}" if shown else ""


def control_now(rt: Runtime, name: str) -> str:
    """``/mode``, ``/effort`` or ``/name`` alone: what it is now and what it may be."""
    if name == "mode":
        return f"mode: {rt.host.mode}; choices: {', '.join(MODES)} (/mode NAME)"
    if name == "effort":
        now = rt.host.effort or "default (the provider's)"
        return f"effort: {now}; choices: low, medium, high (/effort NAME)"
    info = rt.ledger.session(rt.scope) if rt.scope is not None else None
    title = info.title if info is not None and info.title else "(untitled)"
    return f"name: {title} (/name TEXT)"
