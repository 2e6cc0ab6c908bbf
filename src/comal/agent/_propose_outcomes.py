"""What the proposer records when a request does not simply succeed: the request's meta and
usage record (with its cache saving, CCH-2), a response cut short (OUT-1..3), a rejected input
recalibrated (TOK-5), a call that failed after reaching the provider; and the output reserve a
retry may grow to. A mixin of :class:`~._propose.Proposer`, kept apart for size."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..compaction import CHECKPOINTED, CONDENSED, PIPELINE_SUMMARIZED, SUMMARIZED
from ..errors import ContextLength
from ..ledger import LedgerBackend, Record, Scope, UsageInput
from ..providers import CONTEXT_LENGTH, OUTPUT_LENGTH, ModelResponse
from ..tokens import AnchorKey, Budget, InputEstimate, Usage, price_for, saved_vs_uncached
from ._errors import DuplicateCallIds, RepeatedContextLength, RepeatedOutputLength
from ._lengths import (
    CONTEXT_EVENT,
    INCOMPLETE_EVENT,
    escalated_reserve,
    grown_reserve,
    incomplete_body,
    recalibrate,
)
from ._settings import AgentSettings

if TYPE_CHECKING:
    from ..turns import Turn

__all__ = ["Outcomes", "Probe", "Say"]

# The events every engine's stand-ins are stored with (comal.compaction's handlers, commit).
COMPACTIONS = (CHECKPOINTED, PIPELINE_SUMMARIZED, SUMMARIZED, CONDENSED)
# (kind, text): progress for a human. Kinds: turn, call, result, output (a call's whole
# result text, for the surface to bound), note, warn.
Say = Callable[[str, str], None]
Probe = Callable[[str, str], None]  # (phase, detail): fault tests stop the process here


class Outcomes:
    """The proposer's records of what came back; its fields are the proposer's."""

    ledger: LedgerBackend
    scope: Scope
    settings: AgentSettings
    run: str
    say: Say

    def _streaks(self, events: list[Record], at: int) -> list[Record]:
        """The OUTPUT_LENGTH events at this point; raise when a streak is over (OUT-3)."""
        here = [r for r in events if r.body.get("at_seq") == at]
        outs = [r for r in here if r.kind == INCOMPLETE_EVENT and r.body["stop"] == OUTPUT_LENGTH]
        if len(outs) >= 2:
            raise RepeatedOutputLength(
                f"OUTPUT_LENGTH: two responses in a row ran out of output tokens (reserves "
                f"{outs[0].body['max_output_tokens']:,} then "
                f"{outs[1].body['max_output_tokens']:,}); none of their tool calls ran and "
                "the same request is not sent again. Ask for a shorter step, or raise the "
                "model's output limit (output_reserve)."
            )
        recalibrations = [r for r in here if r.kind == CONTEXT_EVENT]
        if len(recalibrations) >= 2:
            raise RepeatedContextLength(
                f"CONTEXT_LENGTH: the provider rejected the input again after a recalibrated "
                f"assembly ({recalibrations[-1].body['reason']}). Nothing was lost. Lower "
                "--context-window, shorten the instructions, or use a model with a larger "
                "window."
            )
        return outs

    def _reserve(self, outs: list[Record], budget: Budget, estimate: InputEstimate) -> int:
        """The output reserve of this request: the budget's, or grown after an OUTPUT_LENGTH."""
        if not outs:
            return budget.output_reserve
        previous = int(outs[-1].body["max_output_tokens"])
        max_output = self.settings.window.max_output
        grown = grown_reserve(previous, budget, estimate.tokens, max_output)
        if grown is None:
            raise RepeatedOutputLength(
                f"OUTPUT_LENGTH: the response ran out of its {previous:,} output tokens and no "
                f"larger reserve fits the {budget.window:,}-token window over ~{estimate.tokens:,} "
                "input tokens; none of its tool calls ran. Ask for a shorter step or use a "
                "model with a larger window."
            )
        self.say("note", f"retrying with an output reserve of {grown:,} tokens")
        return grown

    def _escalate(
        self, reserve: int, budget: Budget, estimate: InputEstimate
    ) -> tuple[int, dict[str, Any] | None]:
        """MEM-3: the first request after a compaction (a stand-in event newer than what the
        previous request had seen) may ask for more output; (max output, what was raised)."""
        ceiling = self.settings.output_escalation
        if ceiling is None:
            return reserve, None
        previous = self.ledger.last_request(self.scope, measured=False)
        seen = previous.meta.get("event_mark") if previous is not None else None
        since = seen if isinstance(seen, int) and not isinstance(seen, bool) else 0
        made = self.ledger.records(self.scope, "event", kinds=COMPACTIONS, since_id=since, limit=1)
        if not made:
            return reserve, None
        max_output = self.settings.window.max_output
        raised = escalated_reserve(reserve, budget, estimate.tokens, max_output, ceiling)
        if raised <= reserve:
            return reserve, None
        self.say("note", f"after a compaction, up to {raised:,} output tokens")
        return raised, {"from": reserve, "to": raised, "after": made[0].kind}

    def _meta(self, key: AnchorKey, max_out: int, estimate: InputEstimate) -> dict[str, Any]:
        """The agent's own fields of a request record (the turn service writes the rest)."""
        return {
            "v": 1,
            "run": self.run,
            "at": datetime.now(UTC).isoformat(timespec="microseconds"),
            "anchor_model": key.model,
            "effort": key.effort,
            "catalog_digest": key.catalog_digest,
            "config_digest": key.config_digest,
            "checkpoint_id": key.checkpoint_id,
            "max_output_tokens": max_out,
            # The newest event this request saw: the next one knows what is new (MEM-3).
            "event_mark": self.ledger.record_mark(self.scope, "event"),
            "estimate": {"tokens": estimate.tokens, "measured": estimate.measured},
        }

    def usage_input(
        self, response: ModelResponse, turn: Turn, fields: dict[str, Any] | None = None
    ) -> UsageInput:
        """The request record of ``response``: its usage, and in its meta what prompt caching
        saved against no caching at list prices (CCH-2; ``None`` when unknown)."""
        model = response.model or self.settings.model
        ttl = turn.record_meta().get("cache_ttl")
        saved = saved_vs_uncached(response.usage, price_for(model), ttl=ttl)
        return turn.usage(
            response.usage,
            model=model,
            protocol=response.provider or None,
            fields={**(fields or {}), "savedVsUncached": saved},
        )

    def _failed(self, turn: Turn, fields: dict[str, Any]) -> None:
        # The call reached the provider (or may have): it counts as a request, with its usage
        # unknown, so the spend guard and a script's position both see it.
        unknown = Usage(None, None, None, None, None)
        turn.record(unknown, model=self.settings.model, fields=fields | {"savedVsUncached": None})

    def _incomplete(self, response: ModelResponse, turn: Turn, estimate: InputEstimate) -> None:
        body = incomplete_body(response, turn.at, int(turn.extra["max_output_tokens"]))
        discarded = ", ".join(c["name"] for c in body["discarded_calls"]) or "none"
        self.say("warn", f"{response.stop}: response discarded (tool calls not run: {discarded})")
        with self.ledger.atomic():
            self.ledger.add_record(self.scope, "event", INCOMPLETE_EVENT, body)
            turn.record_usage(self.usage_input(response, turn, {"incomplete": response.stop}))
            if response.stop == CONTEXT_LENGTH:
                self._rejected(turn, estimate, None, response)

    def _rejected(
        self,
        turn: Turn,
        estimate: InputEstimate,
        exc: ContextLength | None,
        response: ModelResponse | None,
    ) -> None:
        body = recalibrate(turn.budget, self.settings.window.window, estimate.tokens, exc)
        body |= {"v": 1, "at_seq": turn.at, "model": self.settings.model}
        self.say("warn", f"CONTEXT_LENGTH: {body['reason']}")
        with self.ledger.atomic():
            self.ledger.add_record(self.scope, "event", CONTEXT_EVENT, body)
            if response is None:
                self._failed(turn, {"error": "CONTEXT_LENGTH"})

    def _duplicate_ids(self, response: ModelResponse, turn: Turn, ids: list[str]) -> None:
        """Two calls with one id: record the reply as an event (never as history) and stop
        before anything runs; a resume asks the model again."""
        twice = sorted({i for i in ids if ids.count(i) > 1})
        body = incomplete_body(response, turn.at, int(turn.extra["max_output_tokens"]))
        body |= {"stop": "duplicate_call_ids", "duplicates": twice}
        with self.ledger.atomic():
            self.ledger.add_record(self.scope, "event", INCOMPLETE_EVENT, body)
            turn.record_usage(self.usage_input(response, turn, {"incomplete": "duplicate"}))
        raise DuplicateCallIds(
            f"the model's reply gave {len(ids)} tool calls with the id(s) {', '.join(twice)} "
            "used more than once, so their results could not be told apart; it was recorded as "
            "an event and none of its calls ran. Resume to ask the model again."
        )
