"""The governed browser (WEB-1..3): a comal plugin driving Debian's Chromium through
Playwright, every operation judged and receipted by the house.

Enable it as the operator (the model cannot, PLG-1)::

    plugins: [comal.chrome]
    plugin_settings:
      chrome: {origins: ["http://127.0.0.1:8000"], deploy: {...}, publish: {...}}

It adds ``ChromeOpen``, ``ChromeSnapshot``, ``ChromeClick``, ``ChromeFill``, ``ChromeDeploy``,
``ChromePublish``, ``ChromeRecover`` and ``ChromeFinish``. The browser goes only where the
operator's origins allow, enforced by intercepting every request (:mod:`._origins`); a deploy
and a publish record their intent before acting and are reconciled after a crash by a fresh
observation of their target (:mod:`._recover`). ``docs/browser.md`` is the guide. Needs the
``comal[chrome]`` extra (the ``playwright`` package; never ``playwright install``).
"""

from __future__ import annotations

from ._errors import (
    BuildMissing,
    ChromeConfigError,
    ChromeError,
    ChromeUnavailable,
    NoPage,
    OriginRefused,
    PublishBlocked,
    TargetError,
)
from ._hooks import comal_operations, comal_settings
from ._settings import ChromeSettings, DeployTarget, PublishTarget

__all__ = [
    "BuildMissing",
    "ChromeConfigError",
    "ChromeError",
    "ChromeSettings",
    "ChromeUnavailable",
    "DeployTarget",
    "NoPage",
    "OriginRefused",
    "PublishBlocked",
    "PublishTarget",
    "TargetError",
    "comal_operations",
    "comal_settings",
]
