"""The strategies ``comal bench compare`` replays: one seam, several context managers behind it.

A strategy turns a stored session into the requests an agent using it would have sent: one
:class:`Sent` per model call of the original run (each assistant entry after the first entry),
given only the entries before that call. Every strategy sees the same entries, and the harness
prices, checks and times what each one yields in the same way.

- ``full``: no management; the whole history every time (what the original agent sent).
- ``comal-<engine>`` (``comal-limit``, the default): an engine of the registry through
  :func:`comal.turns.replay`, its maintenance executed in memory;
  ``comal-limit:<setting>=<value>[:...]`` runs it with settings of its configuration
  overridden.
- ``masking-N``: observation masking. The N newest tool results stay; every older one is replaced
  by a one-line placeholder, rewritten each turn as the window moves (SWE-agent's
  ``LastNObservations`` history processor; N=5 is the setting studied in arXiv 2508.21433).
- ``langchain-trim``: ``langchain_core.messages.trim_messages`` (see :mod:`._langchain`).
- ``langchain-context-editing``: LangChain v1's ``ContextEditingMiddleware`` with its
  documented defaults (see :mod:`._context_editing`).
- ``langchain-summarization``: LangChain v1's ``SummarizationMiddleware`` with its documented
  defaults and a fake summarizer (see :mod:`._summarization`).

The OpenAI Agents SDK's compaction and pydantic-ai have no row: see :data:`FRAMEWORKS_UNRUN`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from pydantic import BaseModel

from ..context import Engine, EngineCache, engine_names, get_engine
from ..errors import UserError
from ..messages import Message, Role, ToolResult
from ..tokens import Budget, TokenCounter
from ..turns import replay
from ._strategy_types import Sent, Session, Strategy

__all__ = [
    "ComalEngine",
    "Full",
    "ObservationMasking",
    "Sent",
    "Session",
    "Strategy",
    "default_strategies",
    "make_strategy",
    "masking_placeholder",
]


def default_strategies() -> tuple[str, ...]:
    """What ``comal bench compare`` runs when none are named: no management, comal under every
    engine of the registry (a plugin's too), observation masking, LangChain's trim and its
    summarization middleware. The context-editing middleware runs when named."""
    return (
        "full",
        *(f"comal-{e}" for e in engine_names()),
        "masking-5",
        "langchain-trim",
        "langchain-summarization",
    )


# Why no openhands-* strategy runs: said once, shown by the CLI and written into the docs.
OPENHANDS_UNAVAILABLE = (
    "openhands-sdk cannot run here: every release requires Python >= 3.12 (comal supports 3.11), "
    "and its condensers are NoOpCondenser, LLMSummarizingCondenser (needs a model) and "
    "PipelineCondenser only: the observation-masking and recent-events condensers belong to the "
    "legacy openhands-ai package (also Python >= 3.12). Observation masking is measured by "
    "masking-N instead."
)


# The frameworks comal integrates with whose own strategy has no row: said once, shown by the
# CLI and written into the docs.
AGENTS_COMPACTION_UNAVAILABLE = (
    "openai-agents-compaction cannot run offline: the Agents SDK's "
    "OpenAIResponsesCompactionSession has OpenAI's servers compact the history "
    "(responses.compact returns an encrypted compaction item that only OpenAI reads), so no "
    "local run measures it; a fake server answering that endpoint would measure the fake. Its "
    "other sessions (SQLiteSession and the like) keep every item: that is the full row."
)
PYDANTIC_AI_UNAVAILABLE = (
    "pydantic-ai has no row: it ships no context strategy of its own (history processors and "
    "capabilities are written by the user), so the agent sends the whole history: the full row."
)
FRAMEWORKS_UNRUN = (AGENTS_COMPACTION_UNAVAILABLE, PYDANTIC_AI_UNAVAILABLE)


class Full:
    """No management: the whole history before each call."""

    name = "full"
    keeps_store = False

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]:
        messages = tuple(e.message for e in session.entries)
        for i in session.turns:
            yield Sent(messages[:i])


class ComalEngine:
    """An engine of the registry, replayed with its stand-ins held in memory (nothing
    written)."""

    keeps_store = True

    def __init__(self, engine: Engine, config: BaseModel, name: str) -> None:
        self.engine = engine
        self.config = config
        self.name = name

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]:
        turns = replay(
            session.entries,
            session.scope.session,
            budget,
            self.config,
            engine=self.engine,
            cache=EngineCache(),
        )
        for turn in turns:
            if turn.assembly is None:
                yield Sent(None, turn.error, turn.background_ms)
            else:
                yield Sent(turn.assembly.messages, background_ms=turn.background_ms)


def masking_placeholder(result: ToolResult) -> ToolResult:
    """The stand-in for a masked output: its call id stays, so the pair stays whole."""
    lines = len(result.text.splitlines())
    text = f"Old environment output: ({lines} lines omitted)"
    return ToolResult(result.call_id, text, result.is_error, result.name)


class ObservationMasking:
    """Keep the ``keep`` newest tool results; mask every older one."""

    keeps_store = False

    def __init__(self, keep: int) -> None:
        if keep < 1:
            raise UserError(f"masking-{keep}: keep at least one result (masking-5, masking-10)")
        self.keep = keep
        self.name = f"masking-{keep}"

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]:
        messages = [e.message for e in session.entries]
        results = [i for i, m in enumerate(messages) if m.tool_result is not None]
        masked: dict[int, Message] = {}
        for i in session.turns:
            out = messages[:i]
            # Results before this call, oldest first; all but the newest ``keep`` are masked.
            for j in results[: max(0, bisect_left(results, i) - self.keep)]:
                if j not in masked:
                    original = messages[j]
                    result = original.tool_result
                    assert result is not None
                    masked[j] = Message(Role.TOOL, (masking_placeholder(result),), original.name)
                out[j] = masked[j]
            yield Sent(tuple(out))


def _comal_engine(name: str, counter: TokenCounter) -> ComalEngine:
    """``comal-limit:threshold_ratio=0.97:target_ratio=0.3`` overrides engine settings, so a
    tuning can be compared with the default in the same run."""
    head, *items = name.split(":")
    engine = get_engine(head.removeprefix("comal-"))
    fields = engine.config_type.model_fields
    settings: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in fields or key == "counter":
            raise UserError(
                f"{name!r}: write {head}:<setting>=<value>[:...] with settings of the "
                f"{engine.name} engine, e.g. comal-limit:threshold_ratio=0.97:target_ratio=0.3"
            )
        settings[key] = value
    if "counter" in fields:
        settings["counter"] = counter
    try:
        config = engine.config_type.model_validate(settings)
    except ValueError as exc:
        raise UserError(f"{name!r}: {exc}") from None
    return ComalEngine(engine, config, name)


def make_strategy(name: str, counter: TokenCounter) -> Strategy:
    """The strategy called ``name``; a :class:`~comal.errors.UserError` says what exists."""
    if name == "full":
        return Full()
    if name.split(":")[0].removeprefix("comal-") in engine_names() and name.startswith("comal-"):
        return _comal_engine(name, counter)
    if name.startswith("masking-"):
        try:
            keep = int(name.removeprefix("masking-"))
        except ValueError:
            raise UserError(f"{name!r}: write masking-N with a number, e.g. masking-5") from None
        return ObservationMasking(keep)
    if name == "langchain-trim":
        from ._langchain import LangchainTrim

        return LangchainTrim(counter)
    if name.split(":")[0] == "langchain-context-editing":
        from ._context_editing import ContextEditing

        return ContextEditing(name)
    if name.split(":")[0] == "langchain-summarization":
        from ._summarization import LangchainSummarization

        return LangchainSummarization(name)
    if name.startswith("openhands"):
        raise UserError(f"{name}: {OPENHANDS_UNAVAILABLE}")
    if name.startswith(("openai-agents", "agents-")):
        raise UserError(f"{name}: {AGENTS_COMPACTION_UNAVAILABLE}")
    if name.startswith(("pydantic-ai", "pydantic_ai")):
        raise UserError(f"{name}: {PYDANTIC_AI_UNAVAILABLE}")
    engines = ", ".join(f"comal-{e}" for e in engine_names())
    raise UserError(
        f"unknown strategy {name!r}; choose from full, {engines}, masking-N, langchain-trim, "
        "langchain-context-editing, langchain-summarization"
    )
