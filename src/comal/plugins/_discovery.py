"""Where plugins come from: the interpreter's installed packages, never the current folder.

``importlib.metadata.entry_points()`` reads the ``*.dist-info`` of every ``sys.path`` entry,
and ``import_module`` takes the first entry that holds the name. The current folder is often
on ``sys.path`` (``python -m``, a script beside its folder, an empty ``PYTHONPATH`` entry) and
is usually the model's workspace, so both would run code the model wrote in comal's process
(issue 30). Here:

- :func:`installed_entry_points` reads the metadata of the interpreter's own package
  directories only (:func:`installed_paths`: site-packages, the user's when Python enables
  it) — what ``pip install`` (``-e`` too) writes; a ``*.dist-info`` anywhere else is not read;
- :func:`import_plugin` refuses, before running anything of it, a plugin whose top-level
  package would be imported from the current folder.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import site
import sys
import sysconfig
from importlib.machinery import ModuleSpec
from importlib.metadata import EntryPoint, distributions
from pathlib import Path
from typing import Any

from ._errors import PluginLoadError

__all__ = ["import_plugin", "installed_entry_points", "installed_paths", "load_entry_point"]


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def installed_paths() -> list[str]:
    """The entries of ``sys.path`` that are the interpreter's package directories (in
    ``sys.path`` order): never the current folder, a script's folder or a ``PYTHONPATH``
    entry."""
    own = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    own |= set(getattr(site, "getsitepackages", list)())
    if site.ENABLE_USER_SITE:
        own.add(site.getusersitepackages())
    wanted = {_real(p) for p in own if p}
    here = _real(os.getcwd())
    found: list[str] = []
    for entry in sys.path:
        if entry and os.path.isabs(entry):
            real = _real(entry)
            if real in wanted and real != here and entry not in found:
                found.append(entry)
    return found


def installed_entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` that installed packages declare, sorted by name; a
    package installed twice counts once (the first on ``sys.path``, as Python imports it)."""
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for dist in distributions(path=installed_paths()):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        found.extend(dist.entry_points.select(group=group))
    return sorted(found, key=lambda ep: ep.name)


def _roots(spec: ModuleSpec) -> set[str]:
    """The ``sys.path`` entries a top-level module or package was found in (every portion
    of a namespace package); none for a built-in or frozen module."""
    if spec.submodule_search_locations:
        return {_real(str(Path(p).parent)) for p in spec.submodule_search_locations}
    if spec.has_location and spec.origin:
        return {_real(str(Path(spec.origin).parent))}
    return set()


def import_plugin(module: str, name: str, where: str) -> Any:
    """Import ``module`` for the plugin ``name``; refused (a coded error naming the plugin)
    before anything of it runs when its top-level package would come from the current folder.
    Its submodules are found through that package, not ``sys.path``; a package already
    imported (``comal`` itself) was not found by this import and is not looked up again."""
    top = module.partition(".")[0]
    try:
        if top not in sys.modules:
            spec = importlib.util.find_spec(top)  # a top-level name: nothing is executed
            here = _real(os.getcwd())
            installed = {_real(p) for p in installed_paths()}
            if spec is not None and here in _roots(spec) - installed:
                raise PluginLoadError(
                    f"plugin {name!r} ({where}): {top} would be imported from the current "
                    f"folder {here}, which may be a workspace the model writes; it was not "
                    "imported. Install the plugin (pip install) or put its folder on PYTHONPATH "
                    "by an absolute path that is not the folder comal runs in",
                    plugin=name,
                )
        return importlib.import_module(module)
    except PluginLoadError:
        raise
    except Exception as exc:  # ImportError, or whatever the plugin's own import raised
        raise PluginLoadError(
            f"plugin {name!r} ({where}) failed to import: {type(exc).__name__}: {exc}; "
            "install it where this Python finds it, or remove it",
            plugin=name,
        ) from exc


def load_entry_point(ep: EntryPoint) -> Any:
    """The object ``ep`` names, its module imported by :func:`import_plugin`."""
    where = f"entry point {ep.value}"
    plugin = import_plugin(ep.module, ep.name, where)
    try:
        for attr in (ep.attr or "").split(".") if ep.attr else ():
            plugin = getattr(plugin, attr)
    except AttributeError as exc:
        raise PluginLoadError(
            f"plugin {ep.name!r} ({where}) failed to load: {exc}; fix or uninstall the package "
            "that declares it",
            plugin=ep.name,
        ) from exc
    return plugin
