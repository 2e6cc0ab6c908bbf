"""Model schemes: the part of a model spec before ``:`` says which provider answers it.

A :class:`ProviderScheme` knows one scheme — how to read a spec of it (:meth:`~ProviderScheme.
parse`), the form a session stores (:meth:`~ProviderScheme.normalize`), the model name requests
carry (:meth:`~ProviderScheme.model_name`), everything that can fail before a request
(:meth:`~ProviderScheme.check`: a key, a file) and how to build the provider
(:meth:`~ProviderScheme.build`). Schemes are registered by plugins (:mod:`comal.plugins`'s
``comal_providers`` hook); the built-in ones are ``anthropic``, ``openai``,
``openai-responses``, ``openai-compat`` (:mod:`._plugin`) and ``script``
(:mod:`comal.providers.script`). The functions below are the one way in for every surface::

    check_model_spec("anthropic:claude-sonnet-4-6")          # key present? (nothing built)
    provider = provider_for(spec, ProviderContext(ledger=led, scope=scope))
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ComalError
from ._base import DEFAULT_TIMEOUT
from ._errors import ProviderConfigError
from ._retry import RetryPolicy

if TYPE_CHECKING:
    from ..ledger import LedgerBackend, Scope
    from ._types import Provider

__all__ = [
    "ModelSpec",
    "ProviderContext",
    "ProviderScheme",
    "check_model_spec",
    "model_name_of",
    "normalize_model_spec",
    "provider_for",
    "provider_schemes",
    "scheme_of",
    "work_step_spec",
]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed model string: its scheme (``kind``), the rest (``model``), and for
    ``openai-compat`` the server's ``base_url``."""

    kind: str
    model: str
    base_url: str | None = None

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        """``spec`` read by its scheme; an unknown scheme's error lists the registered ones."""
        return scheme_of(spec).parse(spec)

    def __str__(self) -> str:
        if self.base_url is not None:
            return f"{self.kind}:{self.base_url}#{self.model}"
        return f"{self.kind}:{self.model}"


@dataclass(frozen=True, slots=True)
class ProviderContext:
    """What building a provider may use: the environment (keys, base URLs), the retry policy
    and timeout of SDK clients, and for a model that reads its position from the session (the
    ``script:`` model) the session's ledger and scope."""

    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    retry: RetryPolicy | None = None
    timeout: float = DEFAULT_TIMEOUT
    ledger: LedgerBackend | None = None
    scope: Scope | None = None
    # How many of the session's requests this model answered so far (a model that joined the
    # session late: ``-c --model script:NEW``); None, or a None answer: all of them.
    served: Callable[[], int | None] | None = None


class ProviderScheme(ABC):
    """One model scheme. Subclasses set :attr:`scheme` and :attr:`description` and write
    :meth:`build`; the other methods have defaults for a plain ``scheme:MODEL`` spec."""

    scheme: str
    description: str = ""

    def parse(self, spec: str) -> ModelSpec:
        """``spec`` as a :class:`ModelSpec`, or a :class:`ProviderConfigError` saying how to
        write it."""
        rest = spec.partition(":")[2]
        if not rest:
            raise ProviderConfigError(
                f"model spec {spec!r} names no model; write '{self.scheme}:MODEL'"
            )
        return ModelSpec(self.scheme, rest)

    def normalize(self, spec: str) -> str:
        """The spec as a session stores it (a resume in another directory must find the
        same model)."""
        return spec

    def model_name(self, spec: str) -> str:
        """The model name requests carry, and the window catalog looks up."""
        return self.parse(spec).model

    def check(self, spec: str, env: Mapping[str, str]) -> None:
        """Everything that can fail before a request (the spec, a key, a file), as coded
        errors; nothing is built or written."""
        self.parse(spec)

    def work_step(self, spec: str, n: int) -> str:
        """The spec work step ``n`` (1 for a session's first) of a session on ``spec`` runs
        by default: the same model."""
        return spec

    @abstractmethod
    def build(self, spec: str, ctx: ProviderContext) -> Provider:
        """The provider for ``spec``."""


def provider_schemes() -> Mapping[str, ProviderScheme]:
    """Every registered scheme by name, read-only (the built-in ones and the plugins')."""
    from .. import plugins

    return plugins.provider_schemes()


def catalog_specs() -> list[str]:
    """The model specs a picker offers: every catalogued model (:func:`comal.tokens.
    load_catalog`, the user's file included) whose provider is a registered scheme, as
    ``scheme:model``, by scheme then name."""
    from ..tokens import load_catalog

    schemes = provider_schemes()
    names = {(info.provider, info.name) for info, _ in load_catalog().values()}
    return [f"{p}:{n}" for p, n in sorted(names) if p in schemes]


def _find(spec: str) -> ProviderScheme | None:
    name, sep, _ = spec.partition(":")
    return provider_schemes().get(name) if sep else None


def scheme_of(spec: str) -> ProviderScheme:
    """The scheme of ``spec``, or a :class:`ProviderConfigError` listing the registered ones."""
    found = _find(spec)
    if found is None:
        names = ", ".join(provider_schemes())
        raise ProviderConfigError(
            f"model spec {spec!r} does not start with a known provider; write "
            f"'provider:model' with provider one of {names} "
            "(e.g. 'anthropic:claude-sonnet-4-6')"
        )
    return found


def normalize_model_spec(spec: str) -> str:
    """``spec`` in the form a session stores; a spec of no known scheme (an imported
    transcript's model) as it is."""
    found = _find(spec)
    return found.normalize(spec) if found is not None else spec


def model_name_of(spec: str) -> str:
    """The model name requests carry; ``spec`` itself when no scheme reads it (an imported
    transcript's ``deepseek/deepseek-chat`` still names its model for the window catalog)."""
    found = _find(spec)
    if found is None:
        return spec
    try:
        return found.model_name(spec)
    except ComalError:
        return spec


def check_model_spec(spec: str, env: Mapping[str, str] | None = None) -> None:
    """Everything about ``spec`` that can fail before a request: the scheme, the spec's
    form, a key, a file (coded errors, nothing built)."""
    scheme_of(spec).check(spec, os.environ if env is None else env)


def work_step_spec(spec: str, n: int) -> str:
    """The spec work step ``n`` of a session on ``spec`` runs by default (its scheme says)."""
    found = _find(spec)
    return found.work_step(spec, n) if found is not None else spec


def provider_for(spec: str, ctx: ProviderContext | None = None) -> Provider:
    """The provider ``spec`` names, built by its scheme."""
    return scheme_of(spec).build(spec, ctx if ctx is not None else ProviderContext())
