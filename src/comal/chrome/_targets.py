"""Publish targets with an identity (WEB-2): ``publish`` and ``observe``, one adapter each.

- :class:`HttpTarget`: one HTTP resource. Its identity is the sha256 of the bytes it serves;
  a publish is a conditional ``PUT`` (``If-Match`` the ETag observed before, or
  ``If-None-Match: *`` when there was none), so a publish that races another — or a late copy
  of our own — is refused by the target rather than applied twice.
- :class:`GitTarget`: one ref of a git remote. Its identity is the commit the ref points to;
  the commit is made before the intent is recorded (same tree, parent, author and dates give
  the same id), and pushed with a lease on the ref's previous commit.

``observe`` never writes. A target that does not answer raises :class:`TargetError`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..messages import sha256_hex
from ._artifact import Artifact
from ._errors import TargetError
from ._settings import PublishTarget

__all__ = ["GitTarget", "HttpTarget", "Seen", "Target", "target_for"]


@dataclass(frozen=True, slots=True)
class Seen:
    """What a target shows now: its identity (``None``: nothing there) and its version tag."""

    identity: str | None
    tag: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"identity": self.identity, "tag": self.tag}


class Target(Protocol):
    def describe(self) -> dict[str, Any]: ...
    def expected(self, artifact: Artifact, before: Seen) -> str: ...
    def observe(self) -> Seen: ...
    def publish(self, artifact: Artifact, before: Seen) -> Seen: ...


class HttpTarget:
    def __init__(self, url: str, timeout: float) -> None:
        self.url, self.timeout = url, timeout

    def describe(self) -> dict[str, Any]:
        return {"kind": "http", "url": self.url}

    def expected(self, artifact: Artifact, before: Seen) -> str:
        return artifact.digest

    def _send(self, req: urllib.request.Request) -> tuple[int, bytes, str | None]:
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return int(resp.status), resp.read(), resp.headers.get("ETag")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.headers.get("ETag")
        except (OSError, ValueError) as exc:
            raise TargetError(
                f"the publish target {self.url} did not answer ({exc}); check that it runs"
            ) from exc

    def observe(self) -> Seen:
        status, body, etag = self._send(urllib.request.Request(self.url, method="GET"))
        if status == 404:
            return Seen(None)
        if status != 200:
            raise TargetError(f"the publish target {self.url} answered {status} to a read")
        return Seen("sha256:" + sha256_hex(body), etag)

    def publish(self, artifact: Artifact, before: Seen) -> Seen:
        headers = {"Content-Type": "application/x-tar", "X-Comal-Digest": artifact.digest}
        if before.identity is not None and before.tag:
            headers["If-Match"] = before.tag
        elif before.identity is None:
            headers["If-None-Match"] = "*"
        req = urllib.request.Request(self.url, data=artifact.data, method="PUT", headers=headers)
        status, _, etag = self._send(req)
        if status == 412:
            raise TargetError(
                f"the publish target {self.url} refused the publish: it changed since it was "
                "observed (another publisher?); observe it with ChromeRecover and ask a human"
            )
        if not 200 <= status < 300:
            raise TargetError(f"the publish target {self.url} answered {status} to the publish")
        return Seen(artifact.digest, etag)


_GIT_ENV = {
    "GIT_AUTHOR_NAME": "comal",
    "GIT_AUTHOR_EMAIL": "comal@localhost",
    "GIT_COMMITTER_NAME": "comal",
    "GIT_COMMITTER_EMAIL": "comal@localhost",
    # Fixed dates: the same tree and parent make the same commit after a crash.
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


class GitTarget:
    def __init__(self, remote: str, ref: str, timeout: float) -> None:
        self.remote, self.ref, self.timeout = remote, ref, timeout
        self._scratch = Path(tempfile.mkdtemp(prefix="comal-publish-"))

    def describe(self) -> dict[str, Any]:
        return {"kind": "git", "remote": self.remote, "ref": self.ref}

    def _git(self, *args: str, env: dict[str, str] | None = None) -> str:
        full = {**os.environ, **_GIT_ENV, **(env or {})}
        try:
            done = subprocess.run(
                ["git", *args], cwd=self._scratch, env=full, capture_output=True,
                text=True, timeout=self.timeout, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TargetError(f"git {args[0]} failed: {exc}") from exc
        if done.returncode != 0:
            raise TargetError(
                f"git {args[0]} against {self.remote} failed: {done.stderr.strip()[-400:]}"
            )
        return done.stdout.strip()

    def observe(self) -> Seen:
        out = self._git("ls-remote", self.remote, self.ref)
        sha = out.split()[0] if out else None
        return Seen(sha, sha)

    def expected(self, artifact: Artifact, before: Seen) -> str:
        self._git("init", "-q", "--bare", ".")
        if before.identity is not None:
            self._git("fetch", "-q", self.remote, self.ref)
        index = {"GIT_INDEX_FILE": str(self._scratch / "comal-index")}
        for name, data in artifact.files:
            blob = subprocess.run(
                ["git", "hash-object", "-w", "--stdin"], cwd=self._scratch, input=data,
                capture_output=True, check=True, env={**os.environ, **_GIT_ENV},
            ).stdout.decode().strip()  # fmt: skip
            self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", env=index)
        tree = self._git("write-tree", env=index)
        parent = ["-p", before.identity] if before.identity is not None else []
        return self._git("commit-tree", tree, *parent, "-m", f"publish {artifact.digest}")

    def publish(self, artifact: Artifact, before: Seen) -> Seen:
        commit = self.expected(artifact, before)
        lease = f"{self.ref}:{before.identity or ''}"
        self._git("push", "-q", f"--force-with-lease={lease}", self.remote, f"{commit}:{self.ref}")
        return Seen(commit, commit)


def target_for(settings: PublishTarget) -> Target:
    if settings.kind == "http":
        assert settings.url is not None
        return HttpTarget(settings.url, settings.timeout)
    assert settings.remote is not None
    return GitTarget(settings.remote, settings.ref, settings.timeout)


def target_from_intent(described: dict[str, Any], timeout: float = 10.0) -> Target:
    """The target an intent recorded (its own description), for a fresh observation."""
    if described.get("kind") == "http":
        return HttpTarget(str(described["url"]), timeout)
    if described.get("kind") == "git":
        return GitTarget(str(described["remote"]), str(described["ref"]), timeout)
    raise TargetError(f"the intent names an unknown target {described!r}")
