"""One headless Chromium per process, driven by Playwright from a thread of its own.

Playwright's synchronous API belongs to the thread that started it, while the house may run
calls from any thread (the agent's, a work step's): every browser action is sent to the one
thread that owns Playwright and waited for. The browser is Debian's ``chromium``
(``executable``), launched with a fresh profile in a temporary directory (never the user's),
downloads confined to the workspace, service workers blocked, and every request of every page
through the :class:`~._origins.Interceptor`. Each session has its own browser context and page.

Nothing survives the process: after a crash a resumed session starts with a fresh page (the
address of its last observed ``ChromeOpen`` reopened by the next operation that needs a page,
never a replayed click or fill).
"""

from __future__ import annotations

import atexit
import queue
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..ops import OperationTimeout
from ._errors import ChromeUnavailable, PageError
from ._origins import Interceptor, Origins

__all__ = ["BrowserHost", "Tab", "browser_host"]

T = TypeVar("T")


@dataclass
class Tab:
    """A session's context, page and interceptor (used only on the browser thread)."""

    context: Any
    page: Any
    interceptor: Interceptor
    downloads: Path


class BrowserHost:
    """The thread that owns Playwright and the browser, and the tabs by session."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self._jobs: queue.Queue[tuple[Callable[[], Any], Future[Any]] | None] = queue.Queue()
        self._tabs: dict[str, Tab] = {}
        self._browser: Any = None
        self._pw: Any = None
        started: Future[None] = Future()
        self._thread = threading.Thread(
            target=self._main, args=(started,), name="comal-chrome", daemon=True
        )
        self._thread.start()
        started.result()

    def _main(self, started: Future[None]) -> None:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError as exc:
            started.set_exception(
                ChromeUnavailable(
                    f"the browser plugin needs playwright ({exc}); install comal[chrome]"
                )
            )
            return
        if shutil.which(self.executable) is None:
            started.set_exception(
                ChromeUnavailable(
                    f"no chromium at {self.executable}; install Debian's chromium "
                    "(apt-get install chromium) or set plugin_settings.chrome.executable"
                )
            )
            return
        try:
            self._pw = sync_playwright().start()
            self._browser = self._pw.chromium.launch(
                executable_path=self.executable,
                headless=True,
                # Playwright gives it a fresh profile in a temporary directory, removed on close;
                # nothing of the user's is read.
                args=["--disable-background-networking", "--no-first-run"],
            )
        except Exception as exc:
            started.set_exception(ChromeUnavailable(f"chromium did not start: {exc}"))
            return
        started.set_result(None)
        while (job := self._jobs.get()) is not None:
            fn, done = job
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)
        self._shutdown()

    def _shutdown(self) -> None:
        for thing, how in ((self._browser, "close"), (self._pw, "stop")):
            try:
                getattr(thing, how)()
            except Exception:  # closing what may already be gone
                pass

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        """Run ``fn`` on the browser thread. Playwright's own errors (no such element, a
        navigation that failed) are the page's answer, said as :class:`PageError`."""
        done: Future[T] = Future()
        self._jobs.put((fn, done))
        try:
            return done.result(timeout=timeout + 5)
        except TimeoutError as exc:
            if type(exc).__module__.startswith("playwright"):
                raise PageError(_first_line(exc)) from exc
            raise OperationTimeout(
                f"the browser did not answer within {timeout:g} s; the action may still be "
                "under way"
            ) from exc
        except Exception as exc:
            if type(exc).__module__.startswith("playwright"):
                raise PageError(_first_line(exc)) from exc
            raise

    def close(self) -> None:
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout=10)

    # -- on the browser thread -----------------------------------------------------------------
    def tab(self, session: str, origins: Origins, downloads: Path) -> Tab:
        tab = self._tabs.get(session)
        if tab is not None and tab.interceptor.origins == origins:
            return tab
        if tab is not None:
            tab.context.close()
        downloads.mkdir(parents=True, exist_ok=True)
        interceptor = Interceptor(origins)
        context = self._browser.new_context(service_workers="block", accept_downloads=True)
        context.route("**/*", interceptor.route)
        context.route_web_socket("**/*", lambda ws: _socket(ws, origins, interceptor))
        context.on("download", lambda d: _keep(d, downloads))
        tab = Tab(context, context.new_page(), interceptor, downloads)
        self._tabs[session] = tab
        return tab


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__) + "; check the selector or the page"


def _socket(ws: Any, origins: Origins, interceptor: Interceptor) -> None:
    if origins.allows(str(ws.url)):
        ws.connect_to_server()
        return
    interceptor.refuse(str(ws.url), "websocket to an origin not allowed")
    ws.close()


def _keep(download: Any, where: Path) -> None:
    # Only the file's own name, inside the workspace's downloads directory.
    name = Path(str(download.suggested_filename)).name or "download"
    download.save_as(where / name)


_HOST: BrowserHost | None = None
_LOCK = threading.Lock()


def browser_host(executable: str) -> BrowserHost:
    """The process's browser (started on first use)."""
    global _HOST
    with _LOCK:
        if _HOST is None or _HOST.executable != executable:
            if _HOST is not None:
                _HOST.close()
            _HOST = BrowserHost(executable)
            atexit.register(_HOST.close)
        return _HOST
