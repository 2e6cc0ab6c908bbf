"""The workspace root that every native file tool is confined to."""

from __future__ import annotations

from pathlib import Path

from ._errors import WorkspaceEscape

__all__ = ["Workspace"]


class Workspace:
    """A directory; :meth:`resolve` refuses any path that lands outside it.

    Paths are resolved *after* following symlinks and ``..``, so ``link-to-etc/passwd`` and
    ``src/../../x`` are refused alike. Relative paths are taken from the root, never from the
    process's current directory, so a call means the same thing whoever runs it.
    """

    def __init__(self, root: str | Path) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise WorkspaceEscape(f"workspace root {str(root)!r} is not a directory; create it")
        self.root = path.resolve()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def resolve(self, path: str) -> Path:
        if "\x00" in path:
            raise WorkspaceEscape(f"path {path!r} contains a NUL byte")
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = candidate.resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise WorkspaceEscape(
                f"path {path!r} resolves to {resolved}, outside the workspace {self.root}; "
                "use a path inside the workspace"
            )
        return resolved

    def contains(self, path: Path) -> bool:
        resolved = path.resolve()
        return resolved == self.root or self.root in resolved.parents

    def rel(self, path: Path) -> str:
        """The POSIX path relative to the root (``.`` for the root itself)."""
        return path.relative_to(self.root).as_posix() or "."
