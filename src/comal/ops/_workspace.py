"""The workspace root that every native file tool is confined to, opened so it cannot be raced.

Two steps, as the judge and the handlers need them:

- **judgment** — :meth:`Workspace.locate` resolves a path to a workspace-relative POSIX path
  with no symbolic link left in it. It walks one component at a time relative to a descriptor
  of the root and never lets the kernel follow a link: a symlink *inside* the workspace that
  points inside it is followed (its target is walked the same way); one that leads out, an
  absolute target elsewhere, or ``..`` above the root is a :class:`WorkspaceEscape`. Components
  that do not exist yet are taken lexically (a Write may create them). More than 40 links is a
  :class:`SymlinkLoop`.
- **execution** — :meth:`Workspace.open_file`, :meth:`Workspace.parent`, :meth:`Workspace.walk`
  open *exactly* the located path, again component by component from the root descriptor, with
  ``O_NOFOLLOW`` on every step. A component that became a symlink after judgment is refused
  (``WorkspaceEscape``) instead of followed, so what runs is what was judged: neither a path
  outside the workspace nor another path inside it that a rule might have denied.

Only regular files are opened for reading; the open uses ``O_NONBLOCK`` and is checked with
``fstat``, so a FIFO never blocks and a device is never read. Replacing a file writes a temp
file created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` inside the target's directory descriptor and
renames it there (``renameat``), so a planted file or symlink at the temp name is never
followed or overwritten. Every ``OSError`` becomes a coded :class:`ToolFailure`; nothing here
raises anything but :class:`~comal.ops.OpsError` subclasses.

The kernel's ``openat2(RESOLVE_BENEATH)`` would give the same guarantee in one call; it is not
used, so there is one implementation with one meaning on every Linux and macOS.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from ..messages import sha256_hex
from ._errors import NotRegularFile, OpsError, SymlinkLoop, ToolFailure, WorkspaceEscape

__all__ = [
    "DirHandle",
    "Workspace",
    "atomic_write",
    "atomic_write_at",
    "digest_of",
    "file_kind",
    "os_failure",
]

_MAX_LINKS = 40
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | _CLOEXEC
_CHUNK = 1 << 16


def file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def os_failure(exc: OSError, rel: str, doing: str) -> OpsError:
    """The coded error for an ``OSError`` met while ``doing`` something to ``rel``."""
    name = errno.errorcode.get(exc.errno or 0, "EUNKNOWN")
    if exc.errno == errno.ELOOP:
        return SymlinkLoop(f"{rel}: too many levels of symbolic links (ELOOP) while {doing}")
    if exc.errno == errno.ENOENT:
        return ToolFailure(f"{rel} does not exist (ENOENT); check the path with Glob")
    why = exc.strerror or str(exc)
    return ToolFailure(f"{rel}: {why} ({name}) while {doing}")


def _changed(rel: str, name: str) -> WorkspaceEscape:
    return WorkspaceEscape(
        f"{rel}: {name!r} became a symbolic link after the path was judged; nothing was "
        "followed. Make a new proposal with the path as it is now"
    )


def _close(fd: int | None) -> None:
    if fd is not None:
        with suppress(OSError):
            os.close(fd)


def _tmp_name(name: str) -> str:
    return f".{name[:180]}.comal-{os.getpid()}-{secrets.token_hex(6)}.tmp"


def atomic_write_at(dir_fd: int, name: str, data: bytes, mode: int | None = None) -> None:
    """Replace ``name`` in the directory ``dir_fd`` with ``data`` all at once.

    The temp file is created exclusively (a planted file or symlink at its name makes the
    create fail, and another random name is tried), written, fsynced, given ``mode`` (the old
    file's, else the umask's default) and renamed over ``name`` within the same directory.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    for _ in range(8):
        tmp = _tmp_name(name)
        try:
            fd = os.open(tmp, flags, 0o666, dir_fd=dir_fd)
        except FileExistsError:
            continue
        break
    else:  # eight random names taken: someone is planting them
        raise ToolFailure(f"could not create a temp file beside {name!r} (every name was taken)")
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view[: 1 << 20]) :]
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    with suppress(OSError):  # the rename is durable once the directory is
        os.fsync(dir_fd)


def _digest_fd(fd: int) -> str:
    h = hashlib.sha256()
    while chunk := os.read(fd, _CHUNK):
        h.update(chunk)
    return h.hexdigest()


@dataclass
class DirHandle:
    """The directory of one judged path, opened without following links, and the file's name.

    ``fd`` is ``None`` while the directory does not exist yet; :meth:`replace` creates it. Every
    read and write of the file goes through this one descriptor, so the file checked is the
    file replaced.
    """

    workspace: Workspace
    rel: str
    parts: tuple[str, ...]
    name: str
    fd: int | None

    def _stat(self) -> os.stat_result | None:
        if self.fd is None:
            return None
        try:
            return os.stat(self.name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def read(self) -> bytes | None:
        """The file's bytes, or ``None`` when there is no file."""
        fd = self._open()
        if fd is None:
            return None
        try:
            chunks = []
            while chunk := os.read(fd, _CHUNK):
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError as exc:
            raise os_failure(exc, self.rel, "reading") from exc
        finally:
            os.close(fd)

    def digest(self) -> str | None:
        """sha256 of the file's bytes, or ``None`` when there is no file."""
        fd = self._open()
        if fd is None:
            return None
        try:
            return _digest_fd(fd)
        except OSError as exc:
            raise os_failure(exc, self.rel, "reading") from exc
        finally:
            os.close(fd)

    def _open(self) -> int | None:
        st = self._stat()
        if st is None:
            return None
        assert self.fd is not None
        if stat.S_ISLNK(st.st_mode):
            raise _changed(self.rel, self.name)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{self.rel} is {file_kind(st.st_mode)}, not a regular file")
        try:
            fd = os.open(self.name, _READ_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _changed(self.rel, self.name) from exc
            raise os_failure(exc, self.rel, "opening") from exc
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise NotRegularFile(f"{self.rel} is {file_kind(mode)}, not a regular file")
        return fd

    def replace(self, data: bytes) -> None:
        """Write ``data`` as the file, atomically, inside this directory."""
        if self.fd is None:
            self.fd = self.workspace._open_dirs(self.rel, self.parts, create=True)
        st = self._stat()
        if st is not None and not stat.S_ISREG(st.st_mode):
            if stat.S_ISLNK(st.st_mode):
                raise _changed(self.rel, self.name)
            raise NotRegularFile(f"{self.rel} exists and is {file_kind(st.st_mode)}")
        try:
            atomic_write_at(self.fd, self.name, data, stat.S_IMODE(st.st_mode) if st else None)
        except OSError as exc:
            raise os_failure(exc, self.rel, "writing") from exc


class Workspace:
    """A directory; paths are judged and opened inside it (see the module docstring).

    Relative paths are taken from the root, never from the process's current directory, so a
    call means the same thing whoever runs it.
    """

    def __init__(self, root: str | Path) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise WorkspaceEscape(f"workspace root {str(root)!r} is not a directory; create it")
        self.root = path.resolve()
        self._root_text = str(self.root)

    def __repr__(self) -> str:
        return f"Workspace({self._root_text!r})"

    # -- judgment -----------------------------------------------------------------------------
    def _split(self, path: str) -> list[str]:
        if "\x00" in path:
            raise WorkspaceEscape(f"path {path!r} contains a NUL byte")
        if os.path.isabs(path):
            return self._inside(path, path)
        return path.split("/")

    def _inside(self, absolute: str, shown: str) -> list[str]:
        for candidate in (os.path.normpath(absolute), os.path.realpath(absolute)):
            if candidate == self._root_text:
                return []
            if candidate.startswith(self._root_text + "/"):
                return candidate[len(self._root_text) + 1 :].split("/")
        raise WorkspaceEscape(
            f"path {shown!r} is outside the workspace {self.root}; use a path inside the workspace"
        )

    def _root_fd(self) -> int:
        try:
            return os.open(self._root_text, _DIR_FLAGS)
        except OSError as exc:
            raise ToolFailure(
                f"the workspace root {self.root} cannot be opened ({exc.strerror}); "
                "it was moved or removed"
            ) from exc

    def locate(self, path: str) -> str:
        """The workspace-relative POSIX path ``path`` names, with no symlink left in it
        (``.`` for the root). Raises :class:`WorkspaceEscape` or a coded :class:`ToolFailure`."""
        todo = list(reversed(self._split(path)))
        done: list[str] = []
        fds: list[int | None] = [self._root_fd()]  # fds[i] is the directory of done[:i]
        links = 0
        try:
            while todo:
                name = todo.pop()
                if name in ("", "."):
                    continue
                here = fds[-1]
                if name == "..":
                    if not done:
                        raise WorkspaceEscape(
                            f"path {path!r} goes above the workspace root {self.root}; use a "
                            "path inside the workspace"
                        )
                    done.pop()
                    _close(fds.pop())
                    continue
                if here is None:  # below a component that does not exist: taken as written
                    done.append(name)
                    fds.append(None)
                    continue
                try:
                    st = os.stat(name, dir_fd=here, follow_symlinks=False)
                except FileNotFoundError:
                    done.append(name)
                    fds.append(None)
                    continue
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > _MAX_LINKS:
                        raise SymlinkLoop(
                            f"{path}: more than {_MAX_LINKS} symbolic links (a loop, ELOOP)"
                        )
                    target = os.readlink(name, dir_fd=here)
                    if os.path.isabs(target):
                        rest = self._inside(target, f"{path} -> {target}")
                        while len(fds) > 1:
                            _close(fds.pop())
                        done.clear()
                        todo.extend(reversed(rest))
                    else:
                        todo.extend(reversed(target.split("/")))
                    continue
                done.append(name)
                if stat.S_ISDIR(st.st_mode):
                    try:
                        fds.append(os.open(name, _DIR_FLAGS, dir_fd=here))
                    except OSError:
                        fds.append(None)  # swapped meanwhile: the open at execution decides
                else:
                    fds.append(None)
                    if any(t not in ("", ".") for t in todo):
                        raise ToolFailure(f"{path}: {'/'.join(done)} is not a directory")
        except OSError as exc:
            raise os_failure(exc, path, "resolving the path") from exc
        finally:
            for fd in fds:
                _close(fd)
        return "/".join(done) or "."

    def resolve(self, path: str) -> Path:
        """The absolute path ``path`` names inside the workspace (see :meth:`locate`)."""
        rel = self.locate(path)
        return self.root if rel == "." else self.root / rel

    def contains(self, path: Path) -> bool:
        try:
            self.locate(str(path))
        except OpsError:
            return False
        return True

    def rel(self, path: Path) -> str:
        """The POSIX path relative to the root (``.`` for the root itself)."""
        return path.relative_to(self.root).as_posix() or "."

    # -- execution ----------------------------------------------------------------------------
    @staticmethod
    def _judged(rel: str) -> tuple[str, ...]:
        parts = tuple(p for p in rel.split("/") if p not in ("", "."))
        if ".." in parts or rel.startswith("/"):
            raise WorkspaceEscape(f"{rel!r} is not a judged workspace path; locate it first")
        return parts

    def _open_dirs(self, rel: str, parts: tuple[str, ...], *, create: bool) -> int:
        """A descriptor of the directory ``parts``, walked with no link followed."""
        fd = self._root_fd()
        try:
            for name in parts:
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=fd)
                    nxt = self._open_dir_entry(rel, fd, name)
                except (NotADirectoryError, OSError) as exc:
                    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise
                    nxt = self._open_dir_entry(rel, fd, name)
                os.close(fd)
                fd = nxt
        except OpsError:
            _close(fd)
            raise
        except OSError as exc:
            _close(fd)
            raise os_failure(exc, rel, "opening its directory") from exc
        return fd

    def _open_dir_entry(self, rel: str, fd: int, name: str) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise _changed(rel, name) from exc
            if stat.S_ISDIR(st.st_mode):  # swapped back meanwhile: one more try, then refuse
                try:
                    return os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    raise _changed(rel, name) from exc
            raise ToolFailure(
                f"{rel}: {name!r} is {file_kind(st.st_mode)}, not a directory"
            ) from exc

    def open_dir(self, rel: str) -> int:
        """A read descriptor of the judged directory ``rel`` (the caller closes it)."""
        parts = self._judged(rel)
        return self._open_dirs(rel, parts, create=False)

    @contextmanager
    def parent(self, rel: str) -> Iterator[DirHandle]:
        """The :class:`DirHandle` of the judged file path ``rel``."""
        parts = self._judged(rel)
        if not parts:
            raise NotRegularFile(f"{rel} is the workspace root, a directory")
        handle = DirHandle(self, rel, parts[:-1], parts[-1], None)
        try:
            handle.fd = self._open_dirs(rel, parts[:-1], create=False)
        except ToolFailure as exc:
            if not isinstance(exc.__cause__, FileNotFoundError):
                raise
        try:
            yield handle
        finally:
            _close(handle.fd)

    def open_file(self, rel: str) -> tuple[int, os.stat_result]:
        """A read descriptor of the judged regular file ``rel`` and its ``fstat``."""
        with self.parent(rel) as handle:
            if handle.fd is None:
                raise ToolFailure(f"{rel} does not exist; check the path with Glob")
            fd = handle._open()
            if fd is None:
                raise ToolFailure(f"{rel} does not exist; check the path with Glob")
            return fd, os.fstat(fd)

    def read_bytes(self, rel: str) -> bytes | None:
        """The judged file's bytes, or ``None`` when it does not exist."""
        with self.parent(rel) as handle:
            return handle.read()

    def digest(self, rel: str) -> str | None:
        with self.parent(rel) as handle:
            return handle.digest()

    @staticmethod
    def is_regular(dir_fd: int, name: str) -> bool:
        """Is ``name`` in a walked directory a regular file (links not followed)?"""
        try:
            return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            return False

    def open_entry(self, dir_fd: int, name: str, rel: str) -> tuple[int, os.stat_result] | None:
        """A read descriptor of the regular file ``name`` in a walked directory, or ``None``
        for anything else (links, FIFOs, devices, sockets, entries gone meanwhile)."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                return None
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        return fd, st


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` all at once: a crash leaves the old or the new bytes.

    The temp file is created exclusively inside a descriptor of the parent directory and
    renamed there, so a planted file or symlink at the temp name is never followed. (The
    parent itself is reached by path: the workspace's :class:`DirHandle` is the confined way.)
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            st = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
            mode = st.st_mode & 0o7777 if not os.path.islink(path) else None
        except FileNotFoundError:
            mode = None
        atomic_write_at(fd, path.name, data, mode)
    finally:
        os.close(fd)


def digest_of(path: Path) -> str | None:
    """The sha256 of the file at ``path``, ``None`` when there is none."""
    try:
        return sha256_hex(path.read_bytes())
    except FileNotFoundError:
        return None
