"""Errors of the browser plugin, each with a stable code and what to do::

ChromeError (UserError)           root: CHROME_ERROR
├── ChromeConfigError             CHROME_CONFIG: plugin_settings.chrome is malformed
├── ChromeUnavailable             CHROME_UNAVAILABLE: no playwright or no chromium here
├── OriginRefused                 CHROME_ORIGIN: a request left the allowed origins
├── NoPage                        CHROME_NO_PAGE: nothing was opened yet
├── BuildMissing                  CHROME_BUILD: the workspace has no build output
├── TargetError                   CHROME_TARGET: a deploy or publish target failed
└── PublishBlocked                CHROME_PUBLISH_BLOCKED: an earlier publish is unresolved
"""

from __future__ import annotations

from ..errors import UserError

__all__ = [
    "BuildMissing",
    "ChromeConfigError",
    "ChromeError",
    "ChromeUnavailable",
    "NoPage",
    "OriginRefused",
    "PageError",
    "PublishBlocked",
    "TargetError",
]


class ChromeError(UserError):
    code = "CHROME_ERROR"


class ChromeConfigError(ChromeError):
    code = "CHROME_CONFIG"


class ChromeUnavailable(ChromeError):
    code = "CHROME_UNAVAILABLE"


class OriginRefused(ChromeError):
    code = "CHROME_ORIGIN"


class NoPage(ChromeError):
    code = "CHROME_NO_PAGE"


class PageError(ChromeError):
    code = "CHROME_PAGE"


class BuildMissing(ChromeError):
    code = "CHROME_BUILD"


class TargetError(ChromeError):
    code = "CHROME_TARGET"


class PublishBlocked(ChromeError):
    code = "CHROME_PUBLISH_BLOCKED"
