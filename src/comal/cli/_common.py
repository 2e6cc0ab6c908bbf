"""What every command shares: the ledger option, ``--json`` output, coded-error exits, and
the files a command writes (:class:`Output`)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import ComalError, UserError

if TYPE_CHECKING:
    from ..ledger import LedgerBackend
from ..safe_text import encodable, safe, safe_json

F = TypeVar("F", bound=Callable[..., Any])

# A pipe is laid out at ``COLUMNS`` when it is set (``COLUMNS=100 comal show 3f2a | less``),
# else wide: rich would otherwise wrap tables at 80 columns in CI logs.
out = Console(
    highlight=False,
    width=None if sys.stdout.isatty() else shutil.get_terminal_size(fallback=(160, 24)).columns,
)
err = Console(stderr=True, highlight=False)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
# The engine commands' flags (replay, compact).
WindowOpt = Annotated[
    int | None,
    typer.Option("--context-window", help="Cap the window (minimum with the model's).", min=1),
]
ModelOpt = Annotated[str | None, typer.Option(help="Model to budget for (provider:model).")]
EngineOpt = Annotated[
    str, typer.Option(help="Context engine from the registry (limit is the default).")
]


LEDGER_HELP = (
    "Ledger: a file path, a sqlite:////abs/path or file:///abs/path URL, or a postgresql:// URL"
)

LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        envvar="COMAL_LEDGER",
        help=f"{LEDGER_HELP} (default: ledger.db in the per-user data directory).",
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


def no_ledger_yet() -> str | None:
    """The per-user default ledger's path when none was named and it does not exist yet (a
    fresh install: nothing has been written), else None. A ledger named with ``--ledger`` or
    ``COMAL_LEDGER`` that is missing stays an error: that is a typo, not a fresh start."""
    if STATE.ledger_path:
        return None
    target = ledger_target()
    return None if os.path.lexists(target) else target


@contextmanager
def ledger(*, create: bool = False, strict: bool = True) -> Iterator[LedgerBackend]:
    """The ledger, opened for one command. Only commands that write pass ``create``: a
    read on a path with no ledger is an error, never a new empty ledger. Only ``verify`` passes
    ``strict=False``: a ledger whose seals cannot be checked, or older than this machine last
    saw it, opens to be reported on."""
    from ..ledger import open_ledger

    led = open_ledger(ledger_target(), create=create, strict=strict)
    try:
        yield led
    finally:
        led.close()


class OutputPathError(UserError):
    """A file or folder a command was asked to write cannot be written there; ``option`` is
    the flag that named it (``--plot``, ``--dump``, ``--out``)."""

    code = "OUTPUT_PATH"

    def __init__(self, option: str, path: Path, reason: str) -> None:
        super().__init__(
            f"{option} {path}: cannot write there ({reason}); give a path in a folder you can "
            "write to"
        )
        self.option = option
        self.path = path


def _reason(exc: OSError, path: Path) -> str:
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        # errno names neither which part is in the way nor what it is.
        for part in (path, *path.parents):
            if part.exists() and not part.is_dir():
                return f"{part} is a file, not a folder"
    why = exc.strerror or type(exc).__name__
    named = None if exc.filename is None else os.fsdecode(exc.filename)
    return why if named is None or named == str(path) else f"{why}: {named}"


@dataclass(frozen=True)
class Output:
    """A path a command writes (a file, or a folder of files), checked before the work starts
    so a long run never ends in a traceback; :meth:`writing` names it in any later failure.
    Every command that writes files goes through this one helper."""

    path: Path
    option: str
    folder: bool = False

    @classmethod
    def prepare(cls, path: Path, option: str, *, folder: bool = False) -> Output:
        """Create the folder (or the file's folder) and try writing there; a coded error
        naming ``option`` and ``path`` when that fails."""
        made = cls(path, option, folder)
        where = path if folder else path.parent
        with made.writing():
            if not folder and path.is_dir():
                raise IsADirectoryError(21, "it is a folder", str(path))
            where.mkdir(parents=True, exist_ok=True)
        try:
            # A write into the folder itself: being a folder says nothing of /proc or a
            # read-only mount.
            handle, probe = tempfile.mkstemp(dir=where, prefix=".comal-probe-")
        except OSError as exc:
            what = f"no file can be created in {where}: {exc.strerror or type(exc).__name__}"
            raise OutputPathError(option, path, what) from exc
        os.close(handle)
        os.unlink(probe)
        return made

    @contextmanager
    def writing(self) -> Iterator[Path]:
        try:
            yield self.path
        except OSError as exc:
            raise OutputPathError(self.option, self.path, _reason(exc, self.path)) from exc


def emit_json(value: Any, *, escaped: bool = True) -> None:
    # Damaged text read from a ledger (lone surrogates) is shown as its bytes: the output is
    # always valid UTF-8 and valid JSON. What a model or a tool wrote may hold characters a
    # terminal acts on (ESC, C1, bidi overrides): written as JSON escapes, the same value, so
    # `comal ... --json` shown on a terminal, or a file of it read there later, acts on nothing
    # (issue 30): every command's, so ``escaped`` is true unless a caller says otherwise.
    dumped = json.dumps(encodable(value), ensure_ascii=False)
    sys.stdout.write((safe_json(dumped) if escaped else dumped) + "\n")
    sys.stdout.flush()


# What --model takes, for a message that sends a person there.
MODEL_FORMS = (
    "anthropic:MODEL, openai:MODEL, openai-responses:MODEL, openai-compat:URL#MODEL or script:PATH"
)


def said(exc: ComalError) -> str:
    """A coded error's message on the command line. A missing API key's own message is for a
    program (pass ``api_key=`` to the provider); a person at a shell is told the variable to
    export and the other models ``--model`` takes."""
    variable = getattr(exc, "variable", None)
    if exc.code == "PROVIDER_MISSING_KEY" and isinstance(variable, str):
        provider = getattr(exc, "provider", "this")
        return (
            f"{variable} is not set, so the {provider} provider has no API key: export "
            f"{variable}=... and run again, or choose another model with --model ({MODEL_FORMS})"
        )
    return str(exc)


@contextmanager
def coded_errors(as_json: bool) -> Iterator[None]:
    """Turn comal errors into a message (or a JSON error object) and exit code 2."""
    try:
        yield
    except ComalError as exc:
        if as_json:
            emit_json({"error": {"code": exc.code, "message": said(exc)}})
        else:
            shown = escape(f"[{exc.code}] {safe(said(exc))}")
            err.print(f"[bold red]error[/] {shown}", highlight=False)
        raise typer.Exit(2) from exc
