"""Which configuration file the operator named, checked the same way on every surface (CFG-1).

A file named by ``COMAL_CONFIG`` or by a flag (``--config``, ``--file``) must exist: a typo
must stop the command, never let it run with the defaults and without the deny rules the file
was meant to load. Only the per-user default file (:func:`comal.agent.config_path`) may be
absent. This module is small and imports nothing heavy, so the command line checks the
environment before any command runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .errors import InputError

__all__ = ["CONFIG_ENV", "ConfigNotFound", "named_config"]

CONFIG_ENV = "COMAL_CONFIG"


class ConfigNotFound(InputError):
    """A configuration file the operator named does not exist (or is not a file)."""

    code = "CONFIG_NOT_FOUND"


def named_config(
    given: Path | None = None, env: Mapping[str, str] | None = None, *, flag: str = "--config"
) -> Path | None:
    """The configuration file named by ``given`` (a flag), else by ``COMAL_CONFIG``; ``None``
    when neither names one. A named file that is not there is :class:`ConfigNotFound`."""
    env = os.environ if env is None else env
    if given is not None:
        path, how = Path(given).expanduser(), f"{flag} names"
    elif env.get(CONFIG_ENV):
        path, how = Path(env[CONFIG_ENV]).expanduser(), f"{CONFIG_ENV} names"
    else:
        return None
    if path.is_file():
        return path
    what = "it is a folder, not a file" if path.is_dir() else "there is no such file"
    undo = f"unset {CONFIG_ENV}" if given is None else f"leave out {flag}"
    raise ConfigNotFound(
        f"{how} this configuration file, and {what}; nothing is run with the defaults in its "
        f"place: fix the path, or {undo} to read the per-user configuration",
        path=str(path),
    )
