"""Which summarizer a dag configuration names (offline by default)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..context import ExtractiveSummarizer, Summarizer
from ..context.dag import DagConfig
from ..providers import ModelSpec, Provider, provider_from_spec
from ..tokens import TokenCounter
from ._provider import ProviderSummarizer, SummarizerModel

__all__ = ["build_summarizer"]


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
