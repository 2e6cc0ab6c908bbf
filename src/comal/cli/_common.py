"""What every command shares: the ledger option, ``--json`` output, and coded-error exits."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from ..errors import ComalError
from ..ledger import SQLiteLedger, default_ledger_path, open_ledger

F = TypeVar("F", bound=Callable[..., Any])

# Pipes get a wide console: rich would otherwise wrap tables at 80 columns in CI logs.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


@dataclass
class State:
    ledger_path: Path | None = None


STATE = State()


def ledger_path() -> Path:
    return STATE.ledger_path if STATE.ledger_path is not None else default_ledger_path()


@contextmanager
def ledger() -> Iterator[SQLiteLedger]:
    led = open_ledger(ledger_path())
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
            err.print(f"[bold red]error[/] [{exc.code}] {exc}", markup=True, highlight=False)
        raise typer.Exit(2) from exc
