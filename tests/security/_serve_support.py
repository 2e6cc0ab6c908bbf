"""Pieces the ``comal serve`` security tests share: a request body, headless chromium."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 50,
    "messages": [{"role": "user", "content": "hi"}],
}
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def chromium(*args: str) -> Iterator[Any]:
    """Debian's chromium under Playwright (nothing downloaded); skips where it is missing."""
    if not CHROMIUM.exists() or shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is missing: `.ci/run` installs it (apt-get install)")
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed: the chrome extra (make installs it)",
    )
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, *args])
        try:
            yield browser
        finally:
            browser.close()
