"""Deploy: the build output as a release directory of the deploy target, swapped in at once.

``dir/releases/HEX/`` receives the files and ``.comal-deploy.json`` (the artifact's digest);
then the link ``dir/current`` is replaced by an atomic rename. A crash leaves the old release
or the new one being served, never a mix, so a fresh read of ``URL/.comal-deploy.json``
decides after a crash: the intended digest (``postcondition_observed``), the digest from before
(``not_applied``: deploying the same files again is the same deploy), or anything else
(``uncertain``).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urljoin

from ._artifact import Artifact
from ._errors import TargetError
from ._settings import DeployTarget

__all__ = ["MARKER", "deploy", "observe_deploy"]

MARKER = ".comal-deploy.json"


def observe_deploy(url: str, timeout: float = 5.0) -> str | None:
    """The digest the deploy target serves now (``None``: nothing deployed there)."""
    try:
        with urllib.request.urlopen(urljoin(url, MARKER), timeout=timeout) as resp:
            digest = json.loads(resp.read()).get("digest")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise TargetError(f"the deploy target {url} answered {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise TargetError(f"the deploy target {url} did not answer ({exc})") from exc
    return digest if isinstance(digest, str) else None


def deploy(artifact: Artifact, target: DeployTarget, timeout: float) -> str | None:
    """Put the release in place and wait until the target answers with it; its digest."""
    root = Path(target.dir)
    current = root / "current"
    if current.exists() and not current.is_symlink():
        raise TargetError(
            f"{current} is not a link: the deploy target swaps a link to each release; move "
            "what is there away"
        )
    release = root / "releases" / artifact.digest.removeprefix("sha256:")
    for name, data in artifact.files:
        path = release / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (release / MARKER).write_text(json.dumps({"digest": artifact.digest}))
    link = root / f".current-{os.getpid()}"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(release.relative_to(root))
    os.replace(link, current)
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = observe_deploy(target.url)
        if seen == artifact.digest:
            return seen
        time.sleep(0.1)
    return seen
