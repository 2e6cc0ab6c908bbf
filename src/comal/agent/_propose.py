"""One proposal: assemble, guard the spend, call the model, deal with length outcomes.

:meth:`Proposer.propose` returns a *complete* response — one the loop may append as a step and
whose tool calls the house may judge. On the way:

1. the engine assembles the active memory from the ledger under a :class:`~comal.tokens.Budget`
   that prices the system prompt and the tool catalog; a proposed checkpoint is stored in its
   own transaction before anything is sent;
2. the spend guard (TOK-6) sums the ledger's request records and refuses a call that would cross
   a cap, before any HTTP request;
3. the provider is called (streamed into ``on_event`` when given; with a person's ``stop``, a
   call that is abandoned the moment they stop, :func:`~comal.agent._interrupt.stoppable_call`,
   and recorded with its usage unknown); every call that reached it leaves a request record
   with the anchor key of TOK-2 (model, effort, catalog digest, config digest, checkpoint)
   in its meta;
4. OUTPUT_LENGTH and CONTEXT_LENGTH are handled as :mod:`comal.agent._lengths` describes, and
   the first request after a compaction may ask for more output (MEM-3, ``output_escalation``).

The prompt cache is looked after on the way (:mod:`comal.agent._cache`, :mod:`._catalog`): the
tools sent are the deferral's plan (CCH-3), the breakpoints carry the session's TTL (CCH-4),
each request's prefix is compared with the previous one's (CCH-1: ``cache_break`` and
``cache_edit`` events), and a recorded request's meta carries ``savedVsUncached`` (CCH-2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import EllipsisType
from typing import Any

from ..context import (
    Assembly,
    Bounded,
    MediaReferenced,
    Referenced,
    View,
    config_counter,
    get_engine,
)
from ..errors import ContextLength, UserError
from ..ledger import CheckpointRecord, LedgerBackend, Record, Scope
from ..messages import canonical_json, sha256_hex
from ..ops import Catalog, StopSignal
from ..providers import (
    CONTEXT_LENGTH,
    OUTPUT_LENGTH,
    CachePolicy,
    ModelRequest,
    ModelResponse,
    OnEvent,
    Provider,
    ProviderError,
    ToolSpec,
    call_model,
)
from ..tokens import (
    Anchor,
    AnchorKey,
    Budget,
    InputEstimate,
    Usage,
    count_message,
    estimate_input,
)
from ..turns import BudgetFor, ContextSession, Turn
from ._cache import RETENTION_EVENT, CacheWatch, Prefix, Retention, explain, stand_ins
from ._catalog import CATALOG_EVENT, CatalogPlan, ToolDeferral
from ._errors import (
    IncompleteResponse,
)
from ._instructions import INSTRUCTIONS_EVENT, InstructionFiles, Instructions
from ._interrupt import Interrupted, stoppable_call
from ._lengths import (
    CONTEXT_EVENT,
    INCOMPLETE_EVENT,
    session_scale,
)
from ._propose_outcomes import Outcomes, Probe, Say
from ._propose_system import SystemPrompt
from ._settings import AgentSettings
from ._spend import check_spend

__all__ = ["Preview", "Probe", "Proposal", "Proposer", "Say"]


_REWRITES = (Referenced, Bounded, MediaReferenced)


@dataclass(frozen=True, slots=True)
class Preview:
    """What the next request would carry, computed exactly as :meth:`Proposer.propose` does
    but without writing anything: ``/context`` and every status line show this (one estimate
    for every surface, TOK-2)."""

    view: View
    budget: Budget
    assembly: Assembly
    estimate: InputEstimate
    system_tokens: int
    tools_tokens: int
    deferred: tuple[str, ...] = ()  # tools behind ToolSearch (CCH-3)
    instructions: Instructions = field(default_factory=Instructions)  # DRV-1: the files sent
    instructions_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Proposal:
    """A complete response, the request-record meta to store with it, and how it was built."""

    response: ModelResponse
    meta: dict[str, Any]
    assembly: Assembly
    budget: Budget
    estimate: InputEstimate
    turn: Turn


COMPACT_REQUESTED = "compact_requested"
COMPACT_APPLIED = "compact_applied"


def queued_compactions(ledger: LedgerBackend, scope: Scope) -> int:
    """``/compact`` requests recorded by other processes and not yet applied (LIM-7)."""
    asked = applied = 0
    for record in ledger.records(scope, "event", kinds=(COMPACT_REQUESTED, COMPACT_APPLIED)):
        if record.kind == COMPACT_REQUESTED:
            asked += 1
        elif record.kind == COMPACT_APPLIED:
            applied += int(record.body.get("requests", 0))
    return max(0, asked - applied)


@dataclass
class Proposer(Outcomes, SystemPrompt):
    ledger: LedgerBackend
    scope: Scope
    provider: Provider | None
    settings: AgentSettings
    catalog: Catalog
    run: str
    on_event: OnEvent | None = None
    say: Say = lambda kind, text: None
    probe: Probe = lambda phase, detail: None
    # The agent's house, lent to the compaction hooks (HookEvent.host).
    hook_host: object = None
    state: object = None
    stop: StopSignal | None = None
    compact_requested: bool = False
    last: Proposal | None = field(default=None, repr=False)
    # DRV-1: the instruction files (the user's, the workspace's, nested ones), read before
    # every request; None: a system prompt without them.
    files: InstructionFiles | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # The one turn service of this session: engine, configuration, view, assembly,
        # what an assembly stores, maintenance (the agent never calls the engine itself).
        clause = get_engine(self.settings.engine_name).system_clause
        self._start_system(
            f"{self.settings.system}\n\n{clause}" if clause else self.settings.system
        )
        self.service = ContextSession(
            self.ledger,
            self.scope,
            self.settings.engine_name,
            self.settings.engine,
            system=(self.system_message,),
            session_model=self.settings.model,
            session_provider=self.provider,
            say=self.say,
            host=self.hook_host,
        )
        self.engine = self.service.engine
        self.cache = self.service.cache
        counter = config_counter(self.settings.engine)
        self._counter = counter
        self.system_tokens = count_message(counter, self.system_message)
        # CCH-3: the tools sent follow the deferral's plan, made again every turn; CCH-4 and
        # CCH-1: the breakpoints' TTL and the previous request's prefix.
        self.deferral = ToolDeferral(self.catalog, self.engine, self.settings.cache, counter)
        self.retention = Retention(self.settings.cache)
        self.watch = CacheWatch()
        self.cache_ttl: str | None = None
        self._bases: list[int | None] | None = None
        self._resumed = False
        self._plan = self.deferral.plan(View(()), self.settings.window.window)
        self._use(self._plan)
        self._outs: list[Record] = []  # this turn's OUTPUT_LENGTH streak (OUT-3)
        self._prefix: Prefix | None = None  # this turn's request prefix (CCH-1)
        engine = self.settings.engine.model_dump(mode="json")
        # Sets dump in hash order, which differs per process; sorted, the digest is stable.
        engine = {k: sorted(v, key=str) if isinstance(v, list) else v for k, v in engine.items()}
        engine["name"] = self.settings.engine_name
        self._engine_json = engine
        self._config = self._config_digest()

    def _use(self, plan: CatalogPlan) -> None:
        self.tools = [
            ToolSpec(name=t["name"], description=t["description"], input_schema=t["input_schema"])
            for t in plan.tools
        ]
        self.tools_tokens = plan.tokens
        self.tools_digest = plan.digest

    def _tools_for(self, view: View) -> CatalogPlan:
        """The deferral's plan for the next request over ``view`` (kept by :meth:`_record`);
        the first call reads back what an earlier process decided."""
        if not self._resumed:
            self._resumed = True
            kinds = (CATALOG_EVENT, RETENTION_EVENT)
            events = self.ledger.records(self.scope, "event", kinds=kinds)
            catalog = [r for r in events if r.kind == CATALOG_EVENT]
            self.deferral.load(catalog[-1].body if catalog else None)
            self.retention.promoted = any(r.kind == RETENTION_EVENT for r in events)
        plan = self.deferral.plan(view, self.settings.window.window)
        self._use(plan)
        return plan

    # -- budget -----------------------------------------------------------------------------
    def budget(self, scale: float = 1.0) -> Budget:
        res = self.settings.window
        max_input = None if res.max_input is None else max(1, int(res.max_input * scale))
        return self.service.budget(
            max(1, int(res.window * scale)),
            system_tokens=self.system_tokens,
            tools_tokens=self.tools_tokens,
            output_reserve=self.settings.output_reserve,
            max_output=res.max_output,
            max_input=max_input,
        )

    def _key(self, assembly: Assembly, upto: int | None, checkpoint: int | None) -> AnchorKey:
        # Messages rewritten at or below the anchor's last seq (references, bounds) change the
        # prefix it measured, so they are part of the configuration digest (TOK-2).
        rewritten = sorted(
            a.entry_id
            for a in assembly.actions
            if isinstance(a, _REWRITES) and (upto is None or a.seq <= upto)
        )
        # The tools as sent belong to the measured prefix too: a deferral that shows a tool
        # changes it while the catalog (every tool offered) stays the same.
        digest = sha256_hex(canonical_json([self._config, rewritten, self.tools_digest]))
        s = self.settings
        return AnchorKey(s.model, s.effort, self.catalog.digest, digest, checkpoint)

    def _estimate(
        self, view: View, budget: Budget, assembly: Assembly, checkpoint: int | None
    ) -> tuple[InputEstimate, AnchorKey]:
        total = budget.fixed + assembly.history_tokens
        mine = self._key(assembly, None, checkpoint)
        # The newest measured request, from an index: the anchor of TOK-2.
        last = self.ledger.last_request(self.scope, measured=True)
        if last is not None and not isinstance(last.meta.get("prompt_last_seq"), int):
            last = None
        if last is None:
            return estimate_input(None, current=mine, delta_tokens=0, estimated_total=total), mine
        upto = int(last.meta["prompt_last_seq"])
        usage = Usage(last.new_input, last.cache_read, last.cache_write, last.output, None)
        then = AnchorKey(
            str(last.meta.get("anchor_model", "")),
            last.meta.get("effort"),
            str(last.meta.get("catalog_digest", "")),
            str(last.meta.get("config_digest", "")),
            last.meta.get("checkpoint_id"),
        )
        anchor = Anchor.from_usage(usage, last_seq=upto, key=then)
        delta = sum(e.tokens for e in view.entries if e.seq > upto)
        now = self._key(assembly, upto, checkpoint)
        return estimate_input(anchor, current=now, delta_tokens=delta, estimated_total=total), mine

    # -- the proposal -----------------------------------------------------------------------
    def _budget_for(self, scale: float, events: list[Record] | None = None) -> BudgetFor:
        """The turn's budget over the view the turn service reads: the tools sent follow the
        deferral's plan over it (CCH-3); with ``events``, a streak of OUTPUT_LENGTH or
        CONTEXT_LENGTH outcomes at its point stops the turn before anything is stored."""

        def budget_for(view: View) -> Budget:
            if events is not None:
                self._outs = self._streaks(events, view.end_seq)
            self._plan = self._tools_for(view)
            return self.budget(scale)

        return budget_for

    def preview(self) -> Preview:
        """The next request as :meth:`propose` would assemble it, with nothing stored; a
        checkpoint the engine would derive counts as new (the measured anchor no longer
        applies to it, TOK-2)."""
        self._refresh_instructions()
        events = self.ledger.records(self.scope, "event", kinds=(INCOMPLETE_EVENT, CONTEXT_EVENT))
        scale = session_scale(events, self.settings.model)
        turn = self.service.prepare(self._budget_for(scale), state=self.state, preview=True)
        latest = self.ledger.latest_checkpoint(self.scope)
        checkpoint = latest.id if latest is not None else None
        if turn.assembly.checkpoint_to_store is not None:
            checkpoint = -1  # not stored yet: no recorded request measured this prefix
        estimate, _ = self._estimate(turn.view, turn.budget, turn.assembly, checkpoint)
        return Preview(
            turn.view,
            turn.budget,
            turn.assembly,
            estimate,
            self.system_tokens,
            self.tools_tokens,
            self._plan.deferred,
            self.instructions,
            self.instructions_tokens,
        )

    def ttl_at(self, requests_made: int) -> str | None:
        """The breakpoints' TTL of a request after ``requests_made`` others (CCH-4), as the
        live agent chose it: a replay states the TTL each request had."""
        return Retention(self.settings.cache).ttl(requests_made)[0]

    def request_for(
        self, assembly: Assembly, max_output_tokens: int, *, ttl: str | EllipsisType | None = ...
    ) -> ModelRequest:
        """The request an assembly becomes: what is sent, byte for byte (replay uses it too);
        ``ttl`` is the breakpoints' lifetime (default: the one of this agent's next request)."""
        return ModelRequest(
            self.settings.model,
            assembly.messages[1:],  # the system prompt travels in ``system``
            system=self.system_text,
            tools=self.tools,
            max_output_tokens=max_output_tokens,
            effort=self.settings.effort,
            cache=CachePolicy(ttl=self.cache_ttl if isinstance(ttl, EllipsisType) else ttl),
        )

    def propose(self) -> Proposal:
        while True:
            self._refresh_instructions()
            # Only the small events the loop needs: stored tool outputs are events too.
            events = self.ledger.records(
                self.scope, "event", kinds=(INCOMPLETE_EVENT, CONTEXT_EVENT)
            )
            queued = queued_compactions(self.ledger, self.scope)
            compact = self.compact_requested or queued > 0
            self.compact_requested = False
            # The turn service's one order: a /compact asked for while work was running
            # (LIM-7), the maintenance due, the view, the assembly, its commit with the cache's
            # events beside it (:meth:`_beside`), the record's fields.
            turn = self.service.prepare(
                self._budget_for(session_scale(events, self.settings.model), events),
                state=self.state,
                beside=self._beside,
                compact=compact,
            )
            self._compacted(turn, queued)
            self.deferral.commit(self._plan)
            if self._prefix is not None:
                self.watch.accept(self._prefix)
            self.state = turn.assembly.next_state
            latest = self.ledger.latest_checkpoint(self.scope)
            checkpoint = latest.id if latest is not None else None
            estimate, key = self._estimate(turn.view, turn.budget, turn.assembly, checkpoint)
            outs = self._outs
            max_out = self._reserve(outs, turn.budget, estimate)
            escalated = None
            if not outs:  # a retry after OUTPUT_LENGTH grows its own reserve (OUT-3)
                max_out, escalated = self._escalate(max_out, turn.budget, estimate)
            check_spend(
                self.ledger,
                self.scope,
                self.settings.spend,
                run=self.run,
                next_tokens=estimate.tokens + max_out,
            )
            # The agent's own fields of the request record, beside the service's (OBS-1).
            fields = self._meta(key, max_out, estimate)
            fields["cache_ttl"] = self.cache_ttl
            if escalated is not None:
                fields["output_escalated"] = escalated
            if self._prefix is not None:
                fields["prefix"] = self._prefix.compact()
                fields["stand_ins"] = self._bases
            turn.add(fields)
            request = self.request_for(turn.assembly, max_out)
            self.say("turn", f"{estimate.marker} {estimate.tokens:,} → {self.settings.model}")
            response = self._send(request, turn, estimate)
            if response is not None:
                meta = turn.record_meta()
                self.last = Proposal(response, meta, turn.assembly, turn.budget, estimate, turn)
                return self.last

    def _compacted(self, turn: Turn, queued: int) -> None:
        if queued:
            # Another process (``comal compact``) asked while this one held the lock.
            body = {"v": 1, "requests": queued}
            self.ledger.add_record(self.scope, "event", COMPACT_APPLIED, body)
        for record in turn.maintained:
            first, last = getattr(record, "first_seq", "?"), getattr(record, "last_seq", "?")
            self.say("note", f"compacted seq {first}..{last}")

    def _beside(self, view: View, assembly: Assembly) -> Callable[[CheckpointRecord | None], None]:
        """What the agent stores beside the turn's commit, in its transaction, before anything
        is sent: the cache's events — a change of the tools sent, a TTL promotion, a cache
        break or edit (CCH-1..4); the request's prefix is kept for the turn's record."""
        at, plan = view.end_seq, self._plan
        # Indexed reads only: the previous request (one row) and a count, never the log.
        previous = self.ledger.last_request(self.scope, measured=False)
        since = -1
        if previous is not None and isinstance(previous.meta.get("prompt_last_seq"), int):
            since = int(previous.meta["prompt_last_seq"])
        made = int(self.ledger.usage_totals(self.scope)["requests"] or 0)
        self.cache_ttl, promoted = self.retention.ttl(made)
        prefix, finding = None, None
        if self.settings.cache.detect_breaks:
            entries = {e.id: e for e in (*view.pinned, *view.entries)}
            prefix = Prefix.of(
                self.settings.model,
                self.system_text,
                plan.digest,
                assembly.messages[1:],
                assembly.entry_ids[1:],
                entries,
                previous=self.watch.previous,
            )
            before = previous.meta if previous is not None else {}
            finding = self.watch.compare(prefix, before)
            bases = stand_ins(view)
            moved = self._bases is not None and self._bases != bases
            if self._bases is None and "stand_ins" in before:
                moved = before["stand_ins"] != bases
            self._bases = bases
            if finding is not None:
                finding = explain(
                    finding,
                    assembly=assembly,
                    since=since,
                    entries=entries,
                    tools_change=plan.reason,
                    checkpoint_stored=assembly.checkpoint_to_store is not None,
                    stand_ins_changed=moved,
                    system_change=self._instructions_change,
                )
        self._prefix = prefix
        instructions = self._unrecorded()

        def beside(stored: CheckpointRecord | None) -> None:
            if stored is not None and self._bases is not None:
                # Announced now: the next request reads it as its stand-in, unchanged.
                self._bases = [stored.id, *self._bases[1:]]
            if plan.reason is not None:
                self.ledger.add_record(self.scope, "event", CATALOG_EVENT, plan.event(at))
                self.say("note", f"tool catalog: {plan.reason}")
            if promoted:
                body = {"v": 1, "ttl": self.cache_ttl, "after_requests": made, "at_seq": at}
                self.ledger.add_record(self.scope, "event", RETENTION_EVENT, body)
            if instructions is not None:
                # DRV-1: what the system prompt carries from now on, as sent (replay reads it).
                body = instructions.event(at)
                self.ledger.add_record(self.scope, "event", INSTRUCTIONS_EVENT, body)
                self._recorded_now(instructions)
                shown = ", ".join(s.path for s in instructions.sources) or "none"
                self.say("note", f"instructions: {shown}")
            if finding is not None:
                kind, body = finding.event(at)
                self.ledger.add_record(self.scope, "event", kind, body)
                if not finding.announced:
                    self.say("warn", f"prompt cache broken at {finding.part}")

        return beside

    def _send(
        self, request: ModelRequest, turn: Turn, estimate: InputEstimate
    ) -> ModelResponse | None:
        """Call the model; ``None`` when the outcome was recorded and the loop goes again."""
        at = turn.at
        self.probe("assembled", str(at))
        if self.provider is None:
            raise UserError("this proposer has no provider: it can only preview the next request")
        try:
            if self.stop is None:
                response = call_model(self.provider, request, self.on_event)
            else:
                response = stoppable_call(self.provider, request, self.on_event, self.stop)
        except Interrupted:
            self._failed(turn, {"error": Interrupted.code})
            raise
        except ContextLength as exc:
            self._rejected(turn, estimate, exc, None)
            return None
        except ProviderError as exc:
            self._failed(turn, {"error": exc.code})
            raise
        self.probe("proposed", str(at))
        ids = [c.id for c in response.message.tool_calls]
        if len(set(ids)) != len(ids):
            self._duplicate_ids(response, turn, ids)
        if response.stop not in (OUTPUT_LENGTH, CONTEXT_LENGTH, "error"):
            return response
        self._incomplete(response, turn, estimate)
        if response.stop == "error":
            raise IncompleteResponse(
                f"the model's response did not finish (stop {response.raw_stop!r}); it was "
                "recorded as an event and none of its tool calls ran. Resume to try again."
            )
        return None

    def _view(self) -> View:
        return self.service.view()
