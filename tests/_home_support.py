"""A user as comal meets one: a home outside /tmp, the default ledger and config places, and
``comal`` run as a process; and a PATH on which bubblewrap is missing, as on a fresh machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comal.ledger import SQLiteLedger, open_ledger


def path_without(program: str, into: Path, path: str | None = None) -> str:
    """A PATH with everything on ``path`` but ``program``: one directory of links."""
    into.mkdir(parents=True, exist_ok=True)
    for folder in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            link = into / name
            if name != program and not link.exists() and not link.is_symlink():
                link.symlink_to(os.path.join(folder, name))
    return str(into)


@dataclass
class User:
    """``home`` and ``ws`` under /var/tmp (a real home is never under /tmp)."""

    base: Path
    home: Path
    ws: Path

    @property
    def ledger_path(self) -> Path:
        return self.home / ".local" / "share" / "comal" / "ledger.db"

    @property
    def config_path(self) -> Path:
        return self.home / ".config" / "comal" / "config.json"

    def configure(self, data: Mapping[str, Any]) -> None:
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(data))

    def script(self, *replies: dict[str, Any]) -> Path:
        path = self.base / f"script-{uuid.uuid4().hex[:8]}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in replies))
        return path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("COMAL_", "XDG_"))}
        return env | {"HOME": str(self.home)} | extra

    def comal(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "comal", *args],
            cwd=self.ws,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=120,
        )

    @contextmanager
    def ledger(self) -> Iterator[SQLiteLedger]:
        """The user's ledger, opened as this user's comal opens it: their home's key file, none
        of the test process's COMAL_/XDG_ settings (its secret would not be this ledger's)."""
        saved = dict(os.environ)
        try:
            for key in [k for k in os.environ if k.startswith(("COMAL_", "XDG_"))]:
                del os.environ[key]
            os.environ["HOME"] = str(self.home)
            with open_ledger(self.ledger_path) as led:
                yield led
        finally:
            os.environ.clear()
            os.environ.update(saved)


def real_user() -> Iterator[User]:
    base = Path("/var/tmp") / f"comal-user-{uuid.uuid4().hex}"
    user = User(base, base / "home", base / "ws")
    user.home.mkdir(parents=True)
    user.ws.mkdir()
    yield user
    shutil.rmtree(base, ignore_errors=True)
