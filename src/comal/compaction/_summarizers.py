"""Which summarizer a dag configuration names (offline by default)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel

from ..context import ExtractiveSummarizer, Summarizer
from ..context.dag import DagConfig
from ..providers import ModelSpec, Provider, provider_from_spec
from ..tokens import TokenCounter
from ._provider import ProviderSummarizer, SummarizerModel

__all__ = ["build_summarizer", "configured_summarizer", "with_summarizer_window"]


def build_summarizer(
    config: DagConfig,
    counter: TokenCounter,
    *,
    session_model: str | None = None,
    session_provider: Provider | None = None,
    env: Mapping[str, str] = os.environ,
) -> Summarizer:
    """``extractive`` (the default: no model, works offline) or ``provider``: the
    ``summarizer_model`` (empty: the session's model through the session's provider) then
    each of ``summarizer_fallbacks`` in order."""
    if config.summarizer == "extractive":
        return ExtractiveSummarizer(counter)
    chain: list[SummarizerModel] = []
    if config.summarizer_model:
        spec = ModelSpec.parse(config.summarizer_model)
        provider = provider_from_spec(spec, env=env, timeout=config.call_timeout_s)
        chain.append(SummarizerModel(provider, spec.model, str(spec)))
    elif session_provider is not None and session_model:
        model = session_model.partition(":")[2] or session_model
        chain.append(SummarizerModel(session_provider, model, session_model))
    for name in config.summarizer_fallbacks:
        spec = ModelSpec.parse(name)
        provider = provider_from_spec(spec, env=env, timeout=config.call_timeout_s)
        chain.append(SummarizerModel(provider, spec.model, str(spec)))
    if not chain:
        return ExtractiveSummarizer(counter)
    return ProviderSummarizer(chain)


def configured_summarizer(
    config: object,
    counter: TokenCounter,
    *,
    session_model: str | None = None,
    session_provider: Provider | None = None,
    env: Mapping[str, str] = os.environ,
) -> Summarizer | None:
    """The summarizer an engine's configuration names, whatever the engine: the dag's
    ``summarizer`` settings, the pipeline's ``compaction_model``; ``None`` when it names none
    (the engine's own offline default runs)."""
    if isinstance(config, DagConfig):
        return build_summarizer(
            config, counter, session_model=session_model, session_provider=session_provider,
            env=env,
        )  # fmt: skip
    model = getattr(config, "compaction_model", "")
    if isinstance(model, str) and model:
        spec = ModelSpec.parse(model)
        provider = provider_from_spec(spec, env=env)
        return ProviderSummarizer([SummarizerModel(provider, spec.model, str(spec))])
    return None


def with_summarizer_window(config: BaseModel, session_model: str | None) -> BaseModel:
    """A model summarizer's window from the model catalog, so leaf chunks are clamped to it
    (DAG-1), unless the configuration gives one."""
    if not isinstance(config, DagConfig) or config.summarizer != "provider":
        return config
    if config.summarizer_window_tokens:
        return config
    model = config.summarizer_model or session_model
    if not model:
        return config
    from ..tokens import resolve_window

    window = resolve_window(model).window
    return config.model_copy(update={"summarizer_window_tokens": window})
