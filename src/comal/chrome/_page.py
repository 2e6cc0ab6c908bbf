"""What the operations do on the browser thread: open, snapshot, click, fill.

Each returns plain values (digests, text, refusals) the handler turns into a result and
receipt observations; nothing here touches the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..messages import canonical_json, sha256_hex
from ._browser import Tab
from ._origins import Refusal

__all__ = ["Snap", "click", "fill", "open_url", "settle", "snap"]

_HOPS = 10


@dataclass(frozen=True, slots=True)
class Snap:
    url: str
    title: str
    text: str
    tree: str
    png: bytes | None = None

    @property
    def digest(self) -> str:
        """The page as text and accessibility tree (not the pixels, which vary by font)."""
        doc = {"url": self.url, "title": self.title, "text": self.text, "tree": self.tree}
        return "sha256:" + sha256_hex(canonical_json(doc))


def settle(tab: Tab, timeout_ms: float) -> None:
    """Wait for the page to load, following the fresh navigations the interceptor made of
    redirects (each intercepted again)."""
    page = tab.page
    for _ in range(_HOPS):
        try:
            page.wait_for_load_state("load", timeout=timeout_ms)
            hop = page.evaluate("document.documentElement.hasAttribute('data-comal-hop')")
        except Exception:  # the document went away mid-read: a navigation is under way
            hop = True
        if not hop:
            return
        page.wait_for_timeout(100)


def open_url(tab: Tab, url: str, timeout_ms: float) -> tuple[int | None, list[Refusal]]:
    tab.interceptor.drain()
    status: int | None = None
    try:
        response = tab.page.goto(url, wait_until="load", timeout=timeout_ms)
        status = response.status if response is not None else None
    except Exception as exc:
        refused = tab.interceptor.drain()
        if refused:
            return None, refused
        raise exc
    settle(tab, timeout_ms)
    return status, tab.interceptor.drain()


def snap(tab: Tab, timeout_ms: float, *, pixels: bool = False) -> Snap:
    page = tab.page
    settle(tab, timeout_ms)
    text = str(page.inner_text("body", timeout=timeout_ms)) if page.url != "about:blank" else ""
    tree = str(page.locator("body").aria_snapshot(timeout=timeout_ms))
    png = bytes(page.screenshot(timeout=timeout_ms, full_page=True)) if pixels else None
    return Snap(str(page.url), str(page.title()), text, tree, png)


def _act(tab: Tab, timeout_ms: float, action: Any) -> tuple[Snap, Snap, list[Refusal]]:
    before = snap(tab, timeout_ms)
    tab.interceptor.drain()
    action()
    tab.page.wait_for_timeout(200)  # what the action started (a fetch, a popup) gets going
    settle(tab, timeout_ms)
    after = snap(tab, timeout_ms)
    return before, after, tab.interceptor.drain()


def click(tab: Tab, selector: str, timeout_ms: float) -> tuple[Snap, Snap, list[Refusal]]:
    return _act(tab, timeout_ms, lambda: tab.page.click(selector, timeout=timeout_ms))


def fill(
    tab: Tab, selector: str, value: str, timeout_ms: float
) -> tuple[Snap, Snap, list[Refusal]]:
    return _act(tab, timeout_ms, lambda: tab.page.fill(selector, value, timeout=timeout_ms))
