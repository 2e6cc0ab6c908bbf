"""The model's catalog: recall tools under their engine (DAG-7) and tool deferral (CCH-3).

**Under an engine.** :func:`model_catalog` drops the recall tools another engine offers and
this one does not; the house judges calls against that catalog, so a recall tool the model
guesses while another engine runs is refused like any unoffered operation.

**Deferral.** When the tool definitions would take more than ``deferral_threshold`` (10 %) of
the effective window, :class:`ToolDeferral` hides *verbose* tools — those whose definition
(name, description, JSON schema, as sent) counts at least ``verbose_tool_tokens`` — behind the
``ToolSearch`` operation: MCP tools first (largest first), then other verbose ones, until the
rest fits. Never deferred: ``ToolSearch`` itself, ``EvidenceRead`` and the running engine's
recall tools, and the tools called in the last ``recent_tool_turns`` assistant turns. The sent
list is the catalog's own order (sorted by name) without the deferred tools, then
``ToolSearch``, whose description names each deferred tool with a one-line summary.

``ToolSearch`` is an operation of the registry like any other, judged and receipted; it returns
the full definitions of the tools matching its query. A deferred tool becomes visible — sent
again with its schema — once a ``ToolSearch`` result names it or the model calls it, and stays
visible for the rest of the session: the visible set only grows, so the sent list (and the
cached prefix it heads) changes only when a tool is discovered, never back and forth. Each
change is a ``tool_catalog`` event with its reason (the state a resumed process reads back),
which the cache-break detector takes as the announcement of that change of ``tools``.

The deferred tools stay in the catalog the house judges against, so a call to one is judged by
its current contract even before it was discovered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..context import ENGINES, Engine, View
from ..messages import Role, canonical_json
from ..ops import LARGE_CAP, CallContext, Catalog, Operation, Registry, ToolOutput
from ..tokens import TokenCounter
from ._cache import CacheConfig, tools_digest

__all__ = [
    "CATALOG_EVENT",
    "TOOL_SEARCH",
    "CatalogPlan",
    "ToolDeferral",
    "ensure_tool_search",
    "model_catalog",
    "tool_search_operation",
]

TOOL_SEARCH = "ToolSearch"
CATALOG_EVENT = "tool_catalog"
_ALWAYS = frozenset({TOOL_SEARCH, "EvidenceRead"})
_FOUND = re.compile(r"^ToolSearch found [^:\n]*: (.*)$", re.MULTILINE)
_SUMMARY = 90  # characters of a deferred tool's description in ToolSearch's listing


def recall_tools() -> frozenset[str]:
    """Every engine's recall operations (``Engine.model_tools``): reading one back is a reread
    (OBS-2), and ToolSearch never hides one. The one list, from the engines themselves."""
    return frozenset(name for e in ENGINES.values() for name in e.model_tools)


def model_catalog(catalog: Catalog, engine: Engine) -> Catalog:
    """``catalog`` without the operations another engine offers and this one does not: the
    ``ctx_*`` recall tools exist only under ``dag``, ``session_search`` only under
    ``pipeline``."""
    hidden = recall_tools() - set(engine.model_tools)
    kept = tuple(op for op in catalog.operations if op.name not in hidden)
    return Catalog(catalog.surface, kept)


# -- ToolSearch ------------------------------------------------------------------------------


class ToolSearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    query: str = Field(
        min_length=1,
        max_length=500,
        description="Words from the tool's name or purpose, or select:NAME[,NAME...] for "
        "exact names.",
    )
    limit: int = Field(default=5, ge=1, le=20, description="At most this many tools.")


_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return set(_WORD.findall(spaced.lower()))


def search_tools(operations: Iterable[Operation], query: str, limit: int) -> list[Operation]:
    """The operations ``query`` names, best first: ``select:A,B`` picks exact names; otherwise
    each query word scores 3 in a tool's name, 2 inside its name, 1 in its description."""
    ops = list(operations)
    if query.startswith("select:"):
        wanted = [n.strip() for n in query.removeprefix("select:").split(",") if n.strip()]
        by_name = {op.name: op for op in ops}
        return [by_name[n] for n in dict.fromkeys(wanted) if n in by_name][:limit]
    terms = _words(query)
    scored: list[tuple[int, str, Operation]] = []
    for op in ops:
        name_words, lower = _words(op.name), op.name.lower()
        described = _words(op.description)
        score = sum(
            3 if t in name_words else 2 if t in lower else 1 if t in described else 0 for t in terms
        )
        if score:
            scored.append((-score, op.name, op))
    return [op for _, _, op in sorted(scored, key=lambda s: (s[0], s[1]))[:limit]]


def _searchable(registry: Registry) -> list[Operation]:
    recall = recall_tools()
    return [
        op
        for op in registry.for_surface("model")
        if op.name != TOOL_SEARCH and op.name not in recall
    ]


def tool_search_operation(registry: Registry) -> Operation:
    """``ToolSearch``: the full definitions of the model tools matching a query. Its first
    line names them (``ToolSearch found N tool(s) for ...: A, B``), which is what makes them
    visible afterwards; the definitions follow as JSON."""

    def handler(args: ToolSearchArgs, ctx: CallContext) -> ToolOutput:
        found = search_tools(_searchable(registry), args.query, args.limit)
        names = [op.name for op in found]
        if not found:
            return ToolOutput(
                f"ToolSearch found no tool for {args.query!r}; try other words, or "
                "select:NAME with a name from the list in ToolSearch's description",
                observations={"matched": []},
            )
        tools = [
            {"name": op.name, "description": op.description, "input_schema": op.parameters}
            for op in found
        ]
        head = f"ToolSearch found {len(found)} tool(s) for {args.query!r}: {', '.join(names)}"
        body = canonical_json({"tools": tools})
        note = "They are in your tool list from the next turn on; call them directly."
        return ToolOutput(f"{head}\n{note}\n{body}", observations={"matched": names})

    return Operation(
        TOOL_SEARCH,
        "Find tools that are not in your tool list to save context, and load them: returns "
        "their full definitions, and they are in your list from the next turn on.",
        ToolSearchArgs,
        handler,
        audience="model",
        surfaces=frozenset({"model"}),
        inline_cap=LARGE_CAP,
    )


def ensure_tool_search(registry: Registry) -> None:
    """Register ``ToolSearch`` in ``registry`` unless it is there already."""
    if TOOL_SEARCH not in registry:
        registry.add(tool_search_operation(registry))


def found_names(text: str) -> list[str]:
    """The tool names a stored ``ToolSearch`` result made visible (its first line)."""
    match = _FOUND.search(text)
    return [n.strip() for n in match.group(1).split(",") if n.strip()] if match else []


# -- deferral --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeferralState:
    """What a session's deferral decided: ``deferred`` names, the catalog and window it was
    planned for, and the seq the scan for uses and discoveries has reached."""

    deferred: frozenset[str] = frozenset()
    catalog: str = ""
    window: int = 0
    scanned: int = 0
    planned: bool = False
    sent: str = ""  # the digest of the tools sent under this state


@dataclass(frozen=True, slots=True)
class CatalogPlan:
    """The tools of one request: ``tools`` as sent (anthropic tool dicts, in order) and their
    ``tokens``; ``reason`` says why they changed since the previous request (``None``: they
    did not); ``state`` is what to keep when the request is sent."""

    tools: tuple[dict[str, Any], ...]
    tokens: int
    digest: str
    deferred: tuple[str, ...]
    total_tokens: int
    reason: str | None
    state: DeferralState

    def event(self, at_seq: int) -> dict[str, Any]:
        return {
            "v": 1,
            "at_seq": at_seq,
            "reason": self.reason,
            "catalog": self.state.catalog,
            "window": self.state.window,
            "deferred": list(self.deferred),
            "tools_tokens": self.tokens,
            "catalog_tokens": self.total_tokens,
            "tools_digest": self.digest,
        }


@dataclass
class ToolDeferral:
    """CCH-3 for one agent (see the module docstring); :meth:`plan` is pure, :meth:`commit`
    keeps a plan once its request is sent."""

    catalog: Catalog
    engine: Engine
    config: CacheConfig
    counter: TokenCounter
    state: DeferralState = field(default_factory=DeferralState)
    _sizes: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _tools: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for tool in self.catalog.tools("anthropic"):
            self._tools[tool["name"]] = tool
            self._sizes[tool["name"]] = self.counter.count(canonical_json(tool))
        self._full = [n for n in self.catalog.names if n != TOOL_SEARCH]
        self._digest = self.catalog.digest
        self._total = self.counter.count(canonical_json([self._tools[n] for n in self._full]))
        self._counted: dict[str, int] = {}

    @property
    def searchable(self) -> bool:
        return TOOL_SEARCH in self._tools

    def load(self, body: Mapping[str, Any] | None) -> None:
        """Resume from the latest ``tool_catalog`` event (``None``: there is none)."""
        if body is None:
            return
        self.state = DeferralState(
            frozenset(str(n) for n in body.get("deferred", ()) if n in self._tools),
            str(body.get("catalog", "")),
            int(body.get("window", 0)),
            int(body.get("at_seq", 0)),
            planned=True,
            sent=str(body.get("tools_digest", "")),
        )

    def commit(self, plan: CatalogPlan) -> None:
        self.state = plan.state

    def plan(self, view: View, window: int) -> CatalogPlan:
        """The tools of the next request over ``view`` with a ``window``-token window."""
        state = self.state
        end = view.end_seq
        if not state.planned or state.catalog != self._digest or state.window != window:
            deferred = frozenset(self._fresh(view, window))
            fresh = DeferralState(deferred, self._digest, window, end, planned=True)
            plan = self._plan(fresh, None)
            if not state.planned:
                why = f"tools deferred: {', '.join(plan.deferred)}" if deferred else None
            elif plan.digest == state.sent:
                why = None
            else:
                why = "catalog changed" if state.catalog != self._digest else "window changed"
            return replace(plan, reason=why)
        used, found = self._seen(view.entries, state.scanned, state.deferred)
        shown = (used | found) & state.deferred
        new = replace(state, deferred=state.deferred - shown, scanned=end)
        reason = None
        if shown:
            bits = []
            if found & shown:
                bits.append("discovered " + ", ".join(sorted(found & shown)))
            if (used - found) & shown:
                bits.append("used " + ", ".join(sorted((used - found) & shown)))
            reason = "tools " + "; ".join(bits)
        return self._plan(new, reason)

    def _plan(self, state: DeferralState, reason: str | None) -> CatalogPlan:
        deferred = sorted(state.deferred)
        tools = [self._tools[n] for n in self._full if n not in state.deferred]
        if deferred:
            tools.append(self._search_spec(deferred))
        digest = tools_digest(tools)
        tokens = self._counted.get(digest)
        if tokens is None:
            tokens = self.counter.count(canonical_json(tools)) if tools else 0
            self._counted[digest] = tokens
        return CatalogPlan(
            tuple(tools),
            tokens,
            digest,
            tuple(deferred),
            self._total,
            reason,
            replace(state, sent=digest),
        )

    def _search_spec(self, deferred: Sequence[str]) -> dict[str, Any]:
        spec = dict(self._tools[TOOL_SEARCH])
        lines = []
        for name in deferred:
            text = " ".join(str(self._tools[name].get("description", "")).split())
            short = text if len(text) <= _SUMMARY else text[: _SUMMARY - 1] + "…"
            lines.append(f"- {name}: {short}" if short else f"- {name}")
        spec["description"] = f"{spec['description']}\nTools you can load:\n" + "\n".join(lines)
        return spec

    def _fresh(self, view: View, window: int) -> list[str]:
        """Which tools to defer for a session planned now (no earlier decision applies)."""
        limit = self.config.deferral_threshold * window
        total = self._total
        if not self.config.tool_deferral or not self.searchable or total <= limit:
            return []
        keep = set(_ALWAYS) | set(self.engine.model_tools) | self._recent(view)
        verbose = [
            n
            for n in self._full
            if n not in keep and self._sizes[n] >= self.config.verbose_tool_tokens
        ]
        verbose.sort(key=lambda n: (not n.startswith("mcp__"), -self._sizes[n], n))
        deferred: list[str] = []
        running = total + self._sizes[TOOL_SEARCH]
        for name in verbose:
            if running <= limit:
                break
            deferred.append(name)
            running -= self._sizes[name]
            running += self.counter.count(f"- {name}: " + "x" * _SUMMARY) // 2
        return deferred

    def _recent(self, view: View) -> set[str]:
        turns = self.config.recent_tool_turns
        names: set[str] = set()
        seen = 0
        for entry in reversed(view.entries):
            if seen >= turns:
                break
            if entry.role == Role.ASSISTANT.value:
                seen += 1
                names.update(c.name for c in entry.message.tool_calls)
        return names

    @staticmethod
    def _seen(
        entries: Sequence[Any], since: int, deferred: frozenset[str]
    ) -> tuple[set[str], set[str]]:
        """Deferred tools called, and tools ToolSearch returned, in entries from seq ``since``."""
        used: set[str] = set()
        found: set[str] = set()
        searches: set[str] = set()
        if not deferred:
            return used, found
        for entry in entries:
            if entry.seq < since:
                continue
            message = entry.message
            for call in message.tool_calls:
                if call.name in deferred:
                    used.add(call.name)
                elif call.name == TOOL_SEARCH:
                    searches.add(call.id)
            result = message.tool_result
            if result is not None and (result.call_id in searches or result.name == TOOL_SEARCH):
                found.update(found_names(result.text))
        return used, found


# -- the session's catalog ----------------------------------------------------------------------


def session_registry() -> Registry:
    """The registry every agent session's runtime holds: the plugins' and native operations,
    the human and steering operations (never on the model's surface), the long-work
    operations and ``ToolSearch``. MCP servers' tools join it when the servers start."""
    from ..ops import default_registry
    from ..work import work_operations
    from ._human import HUMAN_OPERATIONS
    from ._steering import STEERING_OPERATIONS

    registry = default_registry()
    registry.add_all(HUMAN_OPERATIONS)
    registry.add_all(STEERING_OPERATIONS)
    registry.add_all(work_operations())
    ensure_tool_search(registry)
    return registry


def agent_catalog(registry: Registry, engine: Engine, *, subagent: bool = False) -> Catalog:
    """What an agent offers its model from ``registry`` under ``engine``: the one function the
    agent and ``comal tools --surface model`` read, so the two never differ. A work step's
    agent is not offered the coordinator's operations it cannot run."""
    from ..work import ensure_work_operations

    ensure_tool_search(registry)
    if not subagent:
        ensure_work_operations(registry)
    return model_catalog(registry.catalog("model"), engine)
