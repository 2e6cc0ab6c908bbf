"""The workspace's build output as one artifact: a deterministic tar and its sha256.

The same files give the same bytes on every machine and every run (sorted names, fixed
times, owners and modes), so the digest an intent records before a publish is the digest a
fresh observation of the target can compare after a crash.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ..messages import sha256_hex
from ..ops import Workspace
from ._errors import BuildMissing

__all__ = ["Artifact", "build_artifact"]


@dataclass(frozen=True, slots=True)
class Artifact:
    root: Path
    files: tuple[tuple[str, bytes], ...]
    data: bytes
    digest: str

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.files]


def build_artifact(workspace: Workspace, build_dir: str) -> Artifact:
    rel = workspace.locate(build_dir)
    root = workspace.root / rel
    if not root.is_dir():
        raise BuildMissing(
            f"the build output {build_dir!r} is not a directory of the workspace; build it "
            "first (plugin_settings.chrome.build_dir names it)"
        )
    files: list[tuple[str, bytes]] = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue  # a link could point out of the workspace: never followed
        files.append((path.relative_to(root).as_posix(), path.read_bytes()))
    if not files:
        raise BuildMissing(f"the build output {build_dir!r} is empty; build it first")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    return Artifact(root, tuple(files), data, "sha256:" + sha256_hex(data))
