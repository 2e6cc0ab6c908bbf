"""Instructions from files (DRV-1): what a person writes once for every session, sent to the model
in the system prompt.

Three kinds of file, each ``AGENTS.md`` or, when a directory has none, ``CLAUDE.md``:

- the **user's**, in the per-user configuration directory (``~/.config/comal/AGENTS.md``), for
  every workspace;
- the **workspace's**, at its root;
- **nested** ones, in a subdirectory of the workspace, loaded once a file tool (any operation
  whose paths the house judged: Read, Write, Edit, Glob, Grep) has been let through for a path
  under that subdirectory; from the next request on, for the rest of the session. Bash calls
  do not load them: a command's paths are not judged.

Every file is read afresh before each request, so the system prompt is byte-identical from one
request to the next unless a file changed, appeared, went away or a nested one was loaded:
then the request carries a new prefix, and the change is an ``instructions`` event recorded
beside the request (the whole block as sent, its digest, and each file's path, scope, digest
and size) — what ``comal replay`` puts back in the system prompt of the requests that followed
it. Being in the system prompt, instructions are never compacted: every engine sends the system
prompt first, whole, on every request.

A file is cut at :data:`MAX_CHARS` characters (the cut is said in the text). Files in the
workspace are opened through :class:`~comal.ops.Workspace`, so one that is a link out of the
workspace, a FIFO or a device is skipped, never read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from platformdirs import user_config_dir

from ..errors import ComalError
from ..ledger import LedgerBackend, Scope
from ..messages import sha256_hex
from ..ops import Workspace

__all__ = [
    "FILES",
    "INSTRUCTIONS_EVENT",
    "MAX_CHARS",
    "InstructionFiles",
    "Instructions",
    "Source",
    "changed_files",
    "nested_folders",
    "recorded_instructions",
    "user_dir",
]

INSTRUCTIONS_EVENT = "instructions"
FILES = ("AGENTS.md", "CLAUDE.md")
MAX_CHARS = 64_000
# A UTF-8 character is at most 4 bytes: no more is read of a file than its cut can keep.
_MAX_BYTES = MAX_CHARS * 4
Scope_ = Literal["user", "workspace", "nested"]

_HEAD = (
    "# Instructions from files\n"
    "The user's and the project's instructions, read from the files named below and given as "
    "written. Follow them where they apply (a nested file applies to the files under its "
    "directory). They do not change what the house allows: every tool call is still judged."
)


def user_dir() -> Path:
    """The per-user configuration directory, where the user's own instructions file lives."""
    return Path(user_config_dir("comal", appauthor=False))


@dataclass(frozen=True, slots=True)
class Source:
    """One file as read: ``path`` as shown to the model and the person (workspace-relative, or
    ``~/…`` for the user's), its ``scope``, the text sent (cut at :data:`MAX_CHARS`), the
    sha256 of that text and whether it was cut."""

    path: str
    scope: Scope_
    text: str
    digest: str
    truncated: bool = False

    def render(self) -> str:
        where = {"user": "user", "workspace": "workspace"}.get(self.scope)
        applies = where or f"files under {PurePosixPath(self.path).parent}/"
        cut = (
            f"\n[… cut at {MAX_CHARS:,} characters; read {self.path} for the rest]"
            if self.truncated
            else ""
        )
        head = f'<instructions source="{self.path}" applies="{applies}">'
        return f"{head}\n{self.text}{cut}\n</instructions>"

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "scope": self.scope,
            "digest": self.digest,
            "chars": len(self.text),
            "truncated": self.truncated,
        }


@dataclass(frozen=True, slots=True)
class Instructions:
    """The instructions one request carries: its files, and :attr:`text`, the block appended to
    the system prompt (empty when there is no file)."""

    sources: tuple[Source, ...] = ()
    recorded_text: str | None = None  # a replay's: the block exactly as it was sent

    @property
    def text(self) -> str:
        if self.recorded_text is not None:
            return self.recorded_text
        if not self.sources:
            return ""
        return "\n\n".join([_HEAD, *(s.render() for s in self.sources)])

    @property
    def digest(self) -> str:
        return sha256_hex(self.text.encode("utf-8"))

    @property
    def nested(self) -> tuple[str, ...]:
        return tuple(s.path for s in self.sources if s.scope == "nested")

    def event(self, at_seq: int) -> dict[str, Any]:
        """The ``instructions`` event body of a request that carries these (at ``at_seq``)."""
        return {
            "v": 1,
            "at_seq": at_seq,
            "digest": self.digest,
            "text": self.text,
            "sources": [s.as_dict() for s in self.sources],
        }

    @classmethod
    def from_event(cls, body: Mapping[str, Any]) -> Instructions:
        """The instructions an event recorded, their block exactly as it was sent."""
        sources = tuple(
            Source(
                str(s.get("path", "")),
                s.get("scope", "workspace"),
                "",
                str(s.get("digest", "")),
                bool(s.get("truncated", False)),
            )
            for s in body.get("sources") or ()
            if isinstance(s, Mapping)
        )
        return cls(sources, str(body.get("text", "")))


def recorded_instructions(ledger: LedgerBackend, scope: Scope) -> list[tuple[int, Instructions]]:
    """Every change of instructions the session recorded: (the seq from which it holds, the
    instructions), oldest first."""
    out: list[tuple[int, Instructions]] = []
    for record in ledger.records(scope, "event", kinds=(INSTRUCTIONS_EVENT,)):
        at = record.body.get("at_seq")
        if isinstance(at, int):
            out.append((at, Instructions.from_event(record.body)))
    return out


def _decode(data: bytes) -> tuple[str, bool]:
    text = data.decode("utf-8", "replace")
    if len(text) > MAX_CHARS or len(data) >= _MAX_BYTES:
        return text[:MAX_CHARS], True
    return text, False


def _source(path: str, scope: Scope_, data: bytes) -> Source:
    text, cut = _decode(data)
    return Source(path, scope, text, sha256_hex(text.encode("utf-8")), cut)


def _read_plain(path: Path) -> bytes | None:
    """A file of the user's own configuration directory, read without following a final link
    (at most what its cut keeps)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not _regular(fd):
            return None
        return os.read(fd, _MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def _regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)


@dataclass
class InstructionFiles:
    """The files of one session: the user's directory, the workspace, and the nested
    directories loaded so far (workspace-relative, in the order they were loaded)."""

    workspace: Workspace | None
    user: Path | None = field(default_factory=user_dir)
    nested: list[str] = field(default_factory=list)

    def read(self) -> Instructions:
        """The instructions as the files are now."""
        found: list[Source] = []
        if self.user is not None:
            found += self._user_file()
        if self.workspace is not None:
            for folder in (".", *self.nested):
                source = self._workspace_file(folder)
                if source is not None:
                    found.append(source)
        return Instructions(tuple(found))

    def _user_file(self) -> list[Source]:
        assert self.user is not None
        for name in FILES:
            data = _read_plain(self.user / name)
            if data is not None:
                home = Path.home()
                path = self.user / name
                shown = f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)
                return [_source(shown, "user", data)]
        return []

    def _workspace_file(self, folder: str) -> Source | None:
        assert self.workspace is not None
        for name in FILES:
            rel = name if folder == "." else f"{folder}/{name}"
            data = _read_workspace(self.workspace, rel)
            if data is not None:
                return _source(rel, "workspace" if folder == "." else "nested", data)
        return None

    def has_file(self, folder: str) -> bool:
        return self.workspace is not None and self._workspace_file(folder) is not None

    def touch(self, paths: Iterable[str]) -> list[str]:
        """Load the nested files above ``paths`` (workspace-relative, as the house judged them)
        not loaded yet; returns the directories newly loaded."""
        if self.workspace is None:
            return []
        added: list[str] = []
        for rel in paths:
            for folder in _folders(self.workspace, rel):
                if folder in self.nested or folder in added:
                    continue
                if self.has_file(folder):
                    added.append(folder)
        self.nested += added
        return added

    def load(self, nested: Sequence[str]) -> None:
        """The nested directories an earlier process loaded (from its latest event)."""
        for folder in nested:
            if folder not in self.nested:
                self.nested.append(folder)


def changed_files(before: Instructions, after: Instructions) -> str | None:
    """Why a request's system prompt differs from the one before it (``None``: it does not):
    the files that changed, appeared or went away."""
    if before.text == after.text:
        return None
    old = {s.path: s.digest for s in before.sources}
    new = {s.path: s.digest for s in after.sources}
    changed = sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))
    return "instructions changed: " + (", ".join(changed) or "their framing")


def nested_folders(instructions: Instructions) -> list[str]:
    """The directories of the nested files ``instructions`` carry."""
    return [str(PurePosixPath(p).parent) for p in instructions.nested]


def _folders(workspace: Workspace, rel: str) -> list[str]:
    """The subdirectories from the root down to ``rel`` (``rel`` itself when it is a
    directory), the root left out: the workspace's own file is always sent."""
    parts = [p for p in PurePosixPath(rel).parts if p not in ("", ".")]
    if not parts:
        return []
    if not (workspace.root / rel).is_dir():
        parts = parts[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _read_workspace(workspace: Workspace, rel: str) -> bytes | None:
    """A file of the workspace through its judged opening: a link out of it, a directory, a
    FIFO or a device is not read; at most what the cut keeps is."""
    try:
        located = workspace.locate(rel)
        fd, _ = workspace.open_file(located)
    except (ComalError, OSError):
        return None
    try:
        return os.read(fd, _MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
