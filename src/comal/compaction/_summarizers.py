"""The summarizer an engine's configuration names, built where the providers are.

Each engine's configuration says which summarizer it wants as data
(``summarizer_plan() -> SummarizerPlan | None``, :class:`~comal.context.SummarizerPlan`) and,
when it clamps its chunks to the summarizer's window, takes that window
(``with_summarizer_window(tokens)``); this module builds the summarizer from the plan for any
engine, so no code here names an engine's settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ..context import ExtractiveSummarizer, Summarizer, SummarizerPlan
from ..providers import ModelSpec, Provider, provider_from_spec
from ..tokens import TokenCounter
from ._provider import ProviderSummarizer, SummarizerModel

__all__ = [
    "build_summarizer",
    "configured_summarizer",
    "summarizer_plan",
    "with_summarizer_window",
]


def summarizer_plan(config: object) -> SummarizerPlan | None:
    """What ``config`` names (``None``: it names none, the engine's offline default runs)."""
    plan = getattr(config, "summarizer_plan", None)
    made = plan() if callable(plan) else None
    return made if isinstance(made, SummarizerPlan) else None


def build_summarizer(
    plan: SummarizerPlan | BaseModel,
    counter: TokenCounter,
    *,
    session_model: str | None = None,
    session_provider: Provider | None = None,
    env: Mapping[str, str] = os.environ,
) -> Summarizer:
    """``plan``'s models in order (``""``: the session's model through the session's
    provider), each called with the plan's timeout; none usable: the extractive summarizer.
    An engine's configuration stands for the plan it names."""
    if not isinstance(plan, SummarizerPlan):
        plan = summarizer_plan(plan) or SummarizerPlan()
    chain: list[SummarizerModel] = []
    for name in plan.models:
        if name:
            spec = ModelSpec.parse(name)
            provider = (
                provider_from_spec(spec, env=env)
                if plan.timeout_s is None
                else provider_from_spec(spec, env=env, timeout=plan.timeout_s)
            )
            chain.append(SummarizerModel(provider, spec.model, str(spec)))
        elif session_provider is not None and session_model:
            model = session_model.partition(":")[2] or session_model
            chain.append(SummarizerModel(session_provider, model, session_model))
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
    """The summarizer an engine's configuration names, whatever the engine; ``None`` when it
    names none (the engine's own offline default runs)."""
    plan = summarizer_plan(config)
    if plan is None:
        return None
    return build_summarizer(
        plan, counter, session_model=session_model, session_provider=session_provider, env=env
    )


def with_summarizer_window(config: BaseModel, session_model: str | None) -> BaseModel:
    """``config`` with its model summarizer's window from the model catalog, for an engine
    that clamps its chunks to it (DAG-1), unless the configuration gives one."""
    take: Any = getattr(config, "with_summarizer_window", None)
    plan = summarizer_plan(config)
    if not callable(take) or plan is None or not plan.models or plan.window_tokens:
        return config
    model = plan.models[0] or session_model
    if not model:
        return config
    from ..tokens import resolve_window

    made: BaseModel = take(resolve_window(model).window)
    return made
