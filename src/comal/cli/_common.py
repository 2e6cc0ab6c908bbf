"""What every command shares: the ledger option, ``--json`` output, and coded-error exits."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import ComalError

if TYPE_CHECKING:
    from ..ledger import LedgerBackend

    pass
from ..safe_text import safe

F = TypeVar("F", bound=Callable[..., Any])

# Pipes get a wide console: rich would otherwise wrap tables at 80 columns in CI logs.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        envvar="COMAL_LEDGER",
        help="Ledger: a file path or a postgresql:// URL (default: ledger.db in the per-user "
        "data directory).",
    ),
]


@dataclass
class State:
    ledger_path: str | None = None


STATE = State()


def ledger_target() -> str:
    """The ledger the commands use: ``--ledger`` / ``COMAL_LEDGER`` (a path or a
    ``postgresql://`` URL), else the per-user default file."""
    from ..ledger import default_ledger_target

    return STATE.ledger_path if STATE.ledger_path else default_ledger_target()


@contextmanager
def ledger(*, create: bool = False) -> Iterator[LedgerBackend]:
    """The ledger, opened for one command. Only commands that write pass ``create``: a
    read on a path with no ledger is an error, never a new empty ledger."""
    from ..ledger import open_ledger

    led = open_ledger(ledger_target(), create=create)
    try:
        yield led
    finally:
        led.close()


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
    sys.stdout.flush()


@contextmanager
def coded_errors(as_json: bool) -> Iterator[None]:
    """Turn comal errors into a message (or a JSON error object) and exit code 2."""
    try:
        yield
    except ComalError as exc:
        if as_json:
            emit_json({"error": {"code": exc.code, "message": str(exc)}})
        else:
            shown = escape(f"[{exc.code}] {safe(str(exc))}")
            err.print(f"[bold red]error[/] {shown}", highlight=False)
        raise typer.Exit(2) from exc
