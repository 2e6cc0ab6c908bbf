"""Where the sandbox's mounts go: a pure function from the paths to bubblewrap's mount order.

bubblewrap applies its mount options one after the other, and each needs its mount point to
exist, or to be creatable, at that moment: inside an empty tmpfs bwrap makes it, inside the
read-only root it cannot (``bwrap: Can't create file at …: Read-only file system``, and the
command never runs). So the mounts are laid out, not concatenated:

- each mount is a layer over the host's read-only root: an empty tmpfs (``/tmp``, ``/run``, a
  masked directory), a bind of the host's own files (the workspace and ``writable_paths``
  read-write, ``readable`` paths read-only), or a file mask (an empty read-only file);
- what a path shows is the deepest layer over it, so layers go in order of depth: a masked
  directory, then the workspace bound back inside it, then a mask inside that workspace; at one
  path a bind covers a tmpfs and a mask covers a bind;
- a protected path that is already hidden (under ``/tmp`` or ``/run`` with no bind bringing it
  back, or inside a masked directory) gets no mask of its own: it needs none, and its mount
  point could not be made; a path that does not exist yet needs none where nothing can create
  it (the read-only root), and cannot be kept from being created in a writable directory;
- masked directories are made read-only last, after what is bound back inside them.

:func:`layout` decides from paths and what each one is on the host (``dir``, ``file`` or
``missing``), given canonical (symlink-free, absolute) paths; it reads no filesystem.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["EMPTY_ROOTS", "Kind", "Layout", "Mount", "MountKind", "layout", "under"]

Kind = Literal["dir", "file", "missing"]
MountKind = Literal["root", "tmpfs", "ro-bind", "bind", "mask-dir", "mask-file"]
# The sandbox's private /tmp and its empty /run.
EMPTY_ROOTS = ("/tmp", "/run")
# At one path the later layer wins: a bind over a tmpfs, a mask over a bind.
_RANK: dict[MountKind, int] = {
    "root": 0,
    "tmpfs": 1,
    "ro-bind": 2,
    "bind": 3,
    "mask-dir": 4,
    "mask-file": 4,
}
_HIDING = frozenset({"tmpfs", "mask-dir", "mask-file"})


def under(path: str, root: str) -> bool:
    """``path`` is ``root`` or lies inside it."""
    return path == root or root == "/" or path.startswith(root.rstrip("/") + "/")


def _depth(path: str) -> int:
    return 0 if path == "/" else path.count("/")


@dataclass(frozen=True, slots=True)
class Mount:
    """One layer; ``root`` is the host's read-only root, under everything."""

    kind: MountKind
    path: str

    @property
    def hides(self) -> bool:
        """It shows nothing of the host beneath it."""
        return self.kind in _HIDING

    def _order(self) -> tuple[int, int]:
        return _depth(self.path), _RANK[self.kind]


@dataclass(frozen=True, slots=True)
class Layout:
    """The mounts in bwrap's order (after the read-only root, ``--ro-bind / /``, which is
    not listed) and the protected paths no mask can cover, each with why."""

    mounts: tuple[Mount, ...]
    unprotected: tuple[str, ...] = ()

    @property
    def masks(self) -> list[tuple[str, str]]:
        """``(kind, path)``, ``kind`` being ``dir`` or ``file``."""
        return [(m.kind.removeprefix("mask-"), m.path) for m in self.mounts if "mask" in m.kind]

    def over(self, path: str) -> Mount:
        """The layer that decides what ``path`` shows in the sandbox."""
        return _over(path, self.mounts)


def _over(path: str, mounts: Iterable[Mount]) -> Mount:
    best = Mount("root", "/")
    for mount in mounts:
        if under(path, mount.path) and mount._order() >= best._order():
            best = mount
    return best


def layout(
    protected: Mapping[str, Kind],
    *,
    writable: Iterable[str] = (),
    readable: Iterable[str] = (),
    empty: Iterable[str] = EMPTY_ROOTS,
) -> Layout:
    """The mounts that hide every ``protected`` path it can, keep every ``writable`` path
    writable and show every ``readable`` one; paths are canonical and binds exist."""
    writes = list(dict.fromkeys(writable))
    # A readable path inside a writable one shows anyway, and must stay writable.
    reads = [r for r in dict.fromkeys(readable) if not any(under(r, w) for w in writes)]
    mounts = [Mount("tmpfs", p) for p in dict.fromkeys(empty)]
    mounts += [Mount("ro-bind", p) for p in reads] + [Mount("bind", p) for p in writes]
    unprotected: list[str] = []
    for path in sorted(protected, key=lambda p: (_depth(p), p)):
        kind, over = protected[path], _over(path, mounts)
        if over.hides:
            continue  # already hidden: masking it again would need a mount point in a void
        if kind == "missing":
            if over.kind == "bind":
                unprotected.append(f"{path}: it does not exist yet and lies in a writable path")
            continue  # in the read-only root nothing can create it
        if path == "/":
            unprotected.append("/: masking it would hide the whole system")
        elif over.kind == "bind" and over.path == path:
            unprotected.append(f"{path}: it is itself a writable path")
        else:
            mounts.append(Mount("mask-dir" if kind == "dir" else "mask-file", path))
    # Stable: at one depth and rank the order given is kept.
    return Layout(tuple(sorted(mounts, key=Mount._order)), tuple(unprotected))
