"""The one turn service: everything a turn does with a context engine, for one session.

Every surface that runs a turn — the agent, ``/compact`` queued or idle, the proxy, ``comal
replay`` (:mod:`._replay`), the benchmarks and the compaction sweep — goes through a
:class:`ContextSession`; no other module calls an engine's ``assemble`` or ``plan``. It owns,
for one session:

- the engine and its validated configuration (a plugin's engine is looked up like a built-in);
- the budget: the window, the output reserve and the engine's own threshold (TOK-4);
- the view, read with the stand-ins the engine names, and ``assemble`` over it, with the
  session's engine cache (facts of stored entries reused turn after turn);
- :meth:`commit`: what an assembly proposes — a checkpoint (after the memory flush of the entries
  it stands for, MEM-1), and the OBS-2 events of the engine's new actions — stored in one
  transaction, with whatever the caller stores beside it;
- maintenance: :meth:`maintain` after a turn (inline, or under the session's lease in a sweep,
  on a background thread when the engine's configuration defers it), :meth:`compact` for
  ``/compact`` (forced, with the configured summarizer, wherever it was asked), :meth:`sweep`;
  which jobs run how is the executor table's (:mod:`comal.compaction`);
- :meth:`meta`: the request record's OBS-1 fields, one shape for every surface.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from ..compaction import (
    CHECKPOINTED,
    Background,
    Compactor,
    SweepReport,
    configured_summarizer,
    handler_for,
    sweep_passes,
)
from ..compaction._summarizers import with_summarizer_window
from ..context import (
    Assembly,
    Bounded,
    Checkpointed,
    Engine,
    EngineCache,
    Job,
    Referenced,
    Summarizer,
    View,
    engine_config,
    get_engine,
    store_checkpoint,
)
from ..errors import UserError
from ..ledger import CheckpointRecord, LedgerBackend, Scope, UsageInput
from ..memory import remember
from ..messages import Message
from ..providers import Provider
from ..tokens import Budget, TokenCounter
from ._events import assembly_events
from ._hooks import post_compact, pre_compact
from ._memory import MemoryStore
from ._turn import Turn

__all__ = [
    "Beside",
    "BudgetFor",
    "ContextSession",
    "SummarizerSource",
    "configure",
    "sent_ranges",
    "sweep",
]

Say = Callable[[str, str], None]
Probe = Callable[[str, str], None]
# A turn's budget, or how to make it from the view (the agent's tool catalog depends on it).
BudgetFor = Budget | Callable[[View], Budget]
# What a surface stores beside a turn's commit, in its transaction, decided from the view and
# the assembly (the agent's cache events): given the checkpoint stored, or None.
Beside = Callable[[View, Assembly], Callable[[CheckpointRecord | None], None] | None]
# Builds the configured summarizer when a job first needs one; ``None``: the engine's default.
SummarizerSource = Callable[[], Summarizer | None]


def configure(
    engine: Engine,
    settings: Mapping[str, Any] | BaseModel | None,
    counter: TokenCounter,
    *,
    where: str = "",
) -> BaseModel:
    """``settings`` validated as ``engine``'s configuration; an engine that counts tokens
    itself is given ``counter`` (the ledger's) unless the settings name one."""
    if isinstance(settings, BaseModel):
        return engine_config(engine, settings, where=where)
    given = dict(settings or {})
    if "counter" in engine.config_type.model_fields and "counter" not in given:
        given["counter"] = counter
    return engine_config(engine, given, where=where)


def sent_ranges(seqs: Sequence[int]) -> list[list[int]]:
    """Rising seqs folded into ``[first, last]`` runs."""
    out: list[list[int]] = []
    for s in seqs:
        if out and out[-1][1] == s - 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


class ContextSession:
    """The turn service of one session; see the module docstring."""

    def __init__(
        self,
        ledger: LedgerBackend | MemoryStore,
        scope: Scope,
        engine: Engine | str,
        config: Mapping[str, Any] | BaseModel | None = None,
        *,
        system: Sequence[Message] = (),
        summarizer: SummarizerSource | None = None,
        session_model: str | None = None,
        session_provider: Provider | None = None,
        cache: EngineCache | None = None,
        say: Say = lambda kind, text: None,
        probe: Probe = lambda phase, detail: None,
        where: str = "",
        host: object = None,
    ) -> None:
        # A ledger, or a replay's entries in memory (:mod:`._memory`): the turn is the same.
        self.memory = ledger if isinstance(ledger, MemoryStore) else None
        self._ledger = None if isinstance(ledger, MemoryStore) else ledger
        self.scope = scope
        self.engine = get_engine(engine) if isinstance(engine, str) else engine
        config = configure(self.engine, config, ledger.counter, where=where)
        # A model summarizer's chunks are clamped to its window (DAG-1).
        self.config: BaseModel = with_summarizer_window(config, session_model)
        self.system = tuple(system)
        self.cache = cache if cache is not None else EngineCache()
        self.say = say
        self.probe = probe
        # What the surface lends the compaction hooks (the agent's house), if anything.
        self.host = host
        if summarizer is None:

            def summarizer() -> Summarizer | None:
                return configured_summarizer(
                    self.config,
                    ledger.counter,
                    session_model=session_model,
                    session_provider=session_provider,
                )

        self.summarizer: SummarizerSource = summarizer
        self.owner = f"comal-{uuid.uuid4()}"
        self.background = Background()

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def ledger(self) -> LedgerBackend:
        if self._ledger is None:
            raise UserError("this turn service runs over entries in memory: it has no ledger")
        return self._ledger

    # -- the turn ----------------------------------------------------------------------------
    def prepare(
        self,
        budget: BudgetFor,
        *,
        state: object = None,
        beside: Beside | None = None,
        compact: bool = False,
        maintain: bool = True,
        defer: bool | None = None,
        preview: bool = False,
    ) -> Turn:
        """One turn up to the send, in the one order every surface takes (docs/architecture.md):

        1. ``compact``: a forced compaction first (``/compact`` queued while the agent worked);
        2. the maintenance the engine plans for the session as it stands — the previous turn is
           whole in the ledger now — run inline, or under the lease in a sweep, on a background
           thread when the engine's configuration defers it (``defer`` overrides);
        3. the view, read again when maintenance stored something, and the budget over it;
        4. the assembly, with the surface's engine ``state``;
        5. the commit: the proposed checkpoint and the engine's new events, with what the
           surface stores ``beside`` them, in one transaction, before anything is sent;
        6. the request record's fields the service owns (:attr:`Turn.meta`).

        ``preview`` (``/context``, a status line) does steps 3, 4 and 6 only: nothing written,
        nothing maintained."""
        made: tuple[object, ...] = ()
        view = self.view()
        given = budget(view) if callable(budget) else budget
        if not preview:
            if compact:
                made += tuple(self.compact(given).made)
            if maintain:
                made += self.maintain(given, view=None if made else view, defer=defer)
            if made:
                view = self.view()  # maintenance stored something: read the session again
                given = budget(view) if callable(budget) else budget
        self.probe("turn_viewed", str(view.end_seq))
        assembly = self.assemble(view, given, state=state)
        self.probe("turn_assembled", str(view.end_seq))
        since = self.since()
        stored = None
        if not preview:
            extra = beside(view, assembly) if beside is not None else None
            stored = self.commit(assembly, at=view.end_seq, since=since, beside=extra)
        meta = self.meta(view, given, assembly)
        return Turn(
            view, given, assembly, since, stored, made, meta, committed=not preview, service=self
        )

    def record(self, made: UsageInput, entry_id: int | None = None) -> None:
        """Write a request record built by :meth:`Turn.usage` (a replay records nothing)."""
        if self.memory is None:
            self.ledger.record_request(self.scope, entry_id, made)

    # -- the turn's parts --------------------------------------------------------------------
    def budget(
        self,
        window: int,
        *,
        system_tokens: int,
        tools_tokens: int,
        output_reserve: int | None = None,
        max_output: int | None = None,
        max_input: int | None = None,
    ) -> Budget:
        """The budget of a request to a ``window``-token model, with the engine's threshold."""
        return Budget.for_window(
            window,
            system_tokens=system_tokens,
            tools_tokens=tools_tokens,
            output_reserve=output_reserve,
            max_output=max_output,
            max_input=max_input,
            threshold_ratio=self.engine.threshold_ratio(self.config),
        )

    def view(self) -> View:
        """The session as the engine sees it now (its stand-ins read from the ledger)."""
        if self.memory is not None:
            return self.memory.view(self.system, self.engine.bases)
        return View.from_ledger(
            self.ledger, self.scope, system=self.system, bases=self.engine.bases
        )

    def assemble(self, view: View, budget: Budget, *, state: object = None) -> Assembly:
        return self.engine.assemble(view, budget, self.config, state=state, cache=self.cache)

    def pending(self, budget: Budget, view: View | None = None) -> tuple[Job, ...]:
        """The maintenance due now, nothing run: what ``/state`` reports as pending."""
        return self.plan(view if view is not None else self.view(), budget)

    def plan(self, view: View, budget: Budget, *, force: bool = False) -> tuple[Job, ...]:
        """The maintenance due now (``force``: ``/compact``), nothing run."""
        return self.engine.plan(view, budget, self.config, force=force, cache=self.cache)

    def commit(
        self,
        assembly: Assembly,
        *,
        at: int,
        since: int,
        beside: Callable[[CheckpointRecord | None], None] | None = None,
    ) -> CheckpointRecord | None:
        """Store what ``assembly`` proposes, before anything is sent: its checkpoint and the
        events of the engine's actions new since seq ``since`` (OBS-2), with ``beside`` (the
        caller's own records) in the same transaction. ``at`` is the seq the next entry takes."""
        if self.memory is not None:
            return self.memory.commit(assembly, at)
        events = assembly_events(assembly, since, at_seq=at)
        if assembly.checkpoint_to_store is None and not events and beside is None:
            return None
        stored: CheckpointRecord | None = None
        with self.ledger.atomic():
            proposal = assembly.checkpoint_to_store
            if proposal is not None:
                # Its entries' facts first, in its transaction: a crash leaves both or neither.
                span = (proposal.first_seq, proposal.last_seq)
                remember(self.ledger, self.scope, *span, CHECKPOINTED)
                stored = store_checkpoint(self.ledger, self.scope, proposal)
            for body in events:
                self.ledger.add_record(self.scope, "event", str(body["kind"]), body)
            if beside is not None:
                beside(stored)
        if stored is not None:
            self.say("note", f"checkpoint stored for seq {stored.first_seq}..{stored.last_seq}")
        return stored

    def since(self) -> int:
        """The last seq the previous request of this session carried (-1: none yet), read from
        its record: what an assembly did after it is new (OBS-2)."""
        if self.memory is not None:
            return self.memory.last_sent
        previous = self.ledger.last_request(self.scope, measured=False)
        last = previous.meta.get("prompt_last_seq") if previous is not None else None
        return last if isinstance(last, int) else -1

    def meta(self, view: View, budget: Budget, assembly: Assembly) -> dict[str, Any]:
        """The OBS-1 fields every request record carries, whichever surface sent it."""
        sent_ids = {i for i in assembly.entry_ids if i is not None}
        sent = [e.seq for e in (*view.pinned, *view.head, *view.entries) if e.id in sent_ids]
        made = next((a for a in assembly.actions if isinstance(a, Checkpointed)), None)
        latest = view.checkpoint
        span = made if made is not None else latest
        if self.memory is not None:
            held = self.memory.session_tokens()
        else:
            info = self.ledger.session(self.scope)
            held = info.tokens if info is not None else 0
        input_tokens = budget.fixed + assembly.history_tokens
        return {
            "engine": self.engine.name,
            "prompt_last_seq": view.end_seq - 1,
            "stage": str(assembly.breakdown.get("stage", "verbatim")),
            "window": budget.window,
            "input_limit": budget.input_limit,
            "threshold": budget.threshold_tokens,
            "fixed_tokens": budget.fixed,
            "history_tokens": assembly.history_tokens,
            "input_tokens": input_tokens,
            "session_tokens": budget.fixed + held,
            "sent_seqs": sent_ranges(sent),
            "referenced": [a.entry_id for a in assembly.actions if isinstance(a, Referenced)],
            "bounded": [a.entry_id for a in assembly.actions if isinstance(a, Bounded)],
            "checkpoint": None if span is None else [span.first_seq, span.last_seq],
            "checkpoint_new": made is not None,
            "metrics": assembly.metrics.as_dict(timing=True),
        }

    # -- maintenance -------------------------------------------------------------------------
    def _leased(self, jobs: Sequence[Job]) -> bool:
        return any(handler_for(job).lease for job in jobs)

    def maintain(
        self, budget: Budget, *, view: View | None = None, defer: bool | None = None
    ) -> tuple[object, ...]:
        """After a turn: the maintenance the engine plans now, run inline, or in a sweep under
        the session's lease when a job asks for one — on a background thread when the engine's
        configuration defers compaction (``defer`` overrides); the records made here."""
        if self.memory is not None:
            return self._rehearse(budget, force=False)
        jobs = self.plan(view if view is not None else self.view(), budget)
        if not jobs:
            return ()
        acting = any(j.actionable for j in jobs)
        if acting:
            pre_compact(self.ledger, self.scope, "auto", self.host)
        if not self._leased(jobs):
            report = SweepReport(self.scope.session)
            self._compactor().run(jobs, report)
            if acting:  # a job that only records (a deferred compaction) compacts nothing
                post_compact(self.ledger, self.scope, "auto", report.made, self.host)
            return tuple(report.made)
        deferred = bool(getattr(self.config, "defer_compaction", False)) if defer is None else defer

        def work() -> SweepReport:
            report = self.sweep(budget, owner=self.owner)
            self._tell(report)
            post_compact(self.ledger, self.scope, "auto", report.made, self.host)
            return report

        if deferred:
            self.background.submit(work)
            return ()
        return tuple(work().made)

    def compact(self, budget: Budget) -> SweepReport:
        """``/compact``: do what can be done now even under the thresholds, with the
        configured summarizer — in a sweep under the lease when the engine's jobs need one."""
        if self.memory is not None:
            report = SweepReport(self.scope.session)
            report.made.extend(self._rehearse(budget, force=True))
            return report
        jobs = self.plan(self.view(), budget, force=True)
        pre_compact(self.ledger, self.scope, "manual", self.host)
        if self._leased(jobs):
            report = self.sweep(budget, force=True)
        else:
            report = SweepReport(self.scope.session)
            self._compactor().run(jobs, report)
            if any(not j.actionable for j in jobs) and not report.made:
                report.stopped = "blocked"
        post_compact(self.ledger, self.scope, "manual", report.made, self.host)
        return report

    def sweep(
        self,
        budget: Budget,
        *,
        force: bool = False,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> SweepReport:
        """One bounded round of maintenance under the session's lease, each pass planned
        again from the ledger (see :func:`comal.compaction.sweep_passes`)."""
        return sweep_passes(
            self.ledger,
            self.scope,
            lambda forced: self.plan(self.view(), budget, force=forced),
            self.config,
            self.summarizer,
            force=force,
            owner=owner,
            clock=clock,
            probe=self.probe,
        )

    def drain(self, timeout: float | None = None) -> None:
        """Wait (bounded) for a deferred sweep to finish."""
        self.background.drain(timeout)

    def _rehearse(self, budget: Budget, *, force: bool) -> tuple[object, ...]:
        assert self.memory is not None
        return self.memory.maintain(
            lambda view, forced: self.plan(view, budget, force=forced),
            self.view,
            self.config,
            self.summarizer(),
            force=force,
            deferred=not force and bool(getattr(self.config, "defer_compaction", False)),
        )

    def _compactor(self) -> Compactor:
        return Compactor(self.ledger, self.scope, self.summarizer, self.config, probe=self.probe)

    def _tell(self, report: SweepReport) -> None:
        for s in report.made:
            depth, first, last = (getattr(s, k, None) for k in ("depth", "first_seq", "last_seq"))
            self.say(
                "note", f"summary {getattr(s, 'id', '?')} (depth {depth}) for seq {first}..{last}"
            )
        for b in report.blocked:
            self.say("warn", f"{getattr(b, 'code', '')}: {getattr(b, 'message', '')}")


def sweep(
    ledger: LedgerBackend,
    scope: Scope,
    engine: Engine | str,
    config: BaseModel,
    budget: Budget,
    summarizer: Summarizer | None,
    *,
    force: bool = False,
    owner: str | None = None,
    clock: Callable[[], float] = time.time,
    probe: Probe = lambda phase, detail: None,
) -> SweepReport:
    """One sweep of ``scope`` with ``summarizer`` (a library caller's or a test's own)."""
    service = ContextSession(
        ledger, scope, engine, config, summarizer=lambda: summarizer, probe=probe
    )
    return service.sweep(budget, force=force, owner=owner, clock=clock)
