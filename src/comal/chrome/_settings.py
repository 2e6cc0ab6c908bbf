"""The operator's settings of the browser plugin: ``plugin_settings.chrome`` in the
configuration (operator-only: the model has no operation that reads or changes them)::

    plugins: [comal.chrome]
    plugin_settings:
      chrome:
        executable: /usr/bin/chromium        # Debian's chromium; never a downloaded browser
        origins: ["http://127.0.0.1:8000"]   # default: any loopback origin
        build_dir: dist                      # the workspace's build output
        deploy: {url: "http://127.0.0.1:8001/", dir: /srv/site}
        publish: {kind: http, url: "http://127.0.0.1:8002/artifact"}
        tests: ["test -s dist/index.html"]   # ChromeFinish runs these, as the operator

The deploy target's origin is always allowed besides ``origins``; nothing else widens where
the browser may go. The section is checked with :class:`ChromeSettings` when the configuration
is loaded (the plugin's ``comal_settings`` hook), and again by each call.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ._errors import ChromeConfigError
from ._origins import Origins, origin_of

if TYPE_CHECKING:
    from ..ops import CallContext

__all__ = ["SECTION", "ChromeSettings", "DeployTarget", "PublishTarget", "settings_from"]

SECTION = "chrome"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeployTarget(_Strict):
    """A directory some server serves at ``url``: a deploy is a release directory swapped in
    atomically (``dir/current``), observed answering at ``url``."""

    url: str = Field(pattern=r"^https?://", max_length=2_000)
    dir: str = Field(min_length=1, max_length=4_000)

    @field_validator("dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not Path(value).is_absolute():
            raise ValueError("the deploy directory must be an absolute path")
        return value


class PublishTarget(_Strict):
    """A remote target with an identity: an HTTP resource (its bytes' sha256, conditional PUT
    with its ETag) or a git remote (the pushed commit, pushed with a lease)."""

    kind: Literal["http", "git"]
    url: str | None = Field(default=None, pattern=r"^https?://", max_length=2_000)
    remote: str | None = Field(default=None, min_length=1, max_length=4_000)
    ref: str = Field(default="refs/heads/main", pattern=r"^refs/[\w./-]+$", max_length=200)
    timeout: float = Field(default=10.0, gt=0, le=600)

    @model_validator(mode="after")
    def _where(self) -> PublishTarget:
        if self.kind == "http" and self.url is None:
            raise ValueError("an http publish target needs its url")
        if self.kind == "git" and self.remote is None:
            raise ValueError("a git publish target needs its remote")
        return self


class ChromeSettings(_Strict):
    executable: str = Field(default="/usr/bin/chromium", min_length=1, max_length=4_000)
    origins: list[str] | None = Field(default=None, max_length=200)
    build_dir: str = Field(default="dist", min_length=1, max_length=1_000)
    deploy: DeployTarget | None = None
    publish: PublishTarget | None = None
    tests: list[str] = Field(default_factory=list, max_length=50)
    timeout: float = Field(default=30.0, gt=0, le=600)

    @field_validator("origins")
    @classmethod
    def _origins_parse(cls, value: list[str] | None) -> list[str] | None:
        for origin in value or ():
            if origin != "loopback":
                try:
                    origin_of(origin)
                except ChromeConfigError as exc:  # said by pydantic, with the key's path
                    raise ValueError(str(exc)) from None
        return value

    def allowed(self) -> Origins:
        """Where the browser may go: the operator's origins (default: loopback) and the
        deploy target's."""
        listed = self.origins if self.origins is not None else ["loopback"]
        extra = [self.deploy.url] if self.deploy is not None else []
        return Origins.of([*listed, *extra])


def settings_from(section: Mapping[str, Any] | None) -> ChromeSettings:
    try:
        return ChromeSettings.model_validate(dict(section or {}))
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ChromeConfigError(
            f"plugin_settings.chrome.{key}: {err['msg']}; fix it in the configuration "
            "(docs/browser.md lists the keys)"
        ) from exc


def settings_of(ctx: CallContext) -> ChromeSettings:
    """The chrome section of the configuration the call runs under."""
    section = ctx.factory.plugin_settings.get(SECTION) if ctx.factory is not None else None
    return settings_from(section)
