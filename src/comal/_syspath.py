"""The current folder taken off ``sys.path`` before comal's own commands run (issue 30, PLG-1).

``python -m comal`` puts the folder it was started in first on ``sys.path``, and so does an
empty entry of ``PYTHONPATH`` (``$PYTHONPATH:/x`` with nothing before it) for the ``comal``
console script. That folder is usually the model's workspace, which the model can Write: a
``yaml.py`` there would be imported the first time comal reads a YAML configuration, inside
comal's process and outside the sandbox. :func:`forget_current_folder` removes those entries,
so every module a command imports after it starts is found where the interpreter installed it
(or on a ``PYTHONPATH`` entry the operator named by an absolute path that is not this folder).

It cannot help with what Python imported before comal's code ran: ``python -m comal`` started
in a folder holding a ``comal/`` package runs that package, not comal. Run the ``comal``
console script, or ``python -P -m comal`` (Python 3.11's safe path), from a folder the model
writes. This module imports only the standard library, so the entry points call it first.
"""

from __future__ import annotations

import os
import sys

__all__ = ["forget_current_folder"]


def forget_current_folder() -> list[str]:
    """Remove from ``sys.path`` every entry that means the current folder (``""``, ``"."``, any
    relative entry, the folder's own path); return what was removed."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # the folder is gone: relative entries still follow it, drop them
        here = None
    kept: list[str] = []
    dropped: list[str] = []
    for entry in sys.path:
        relative = not entry or not os.path.isabs(entry)
        if relative or (here is not None and os.path.realpath(entry) == here):
            dropped.append(entry)
        else:
            kept.append(entry)
    if dropped:
        sys.path[:] = kept
    return dropped
