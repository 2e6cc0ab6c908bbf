"""The ``memory_search`` operation: what this agent remembers from its earlier sessions (MEM-2,
DRV-7).

Read-only, judged and receipted like every operation. It searches the memories of the calling
session's (tenant, agent) — facts saved before anything was summarized, in any of its sessions
— and a person's notes, never a forgotten memory, and the entries of its *other* sessions,
ranked together, exact matches first (:func:`comal.memory.memory_search`);
never another agent's, never another tenant's: the scope is the house's session, not an
argument, so the model cannot name another. This session's own history is ``ctx_search``'s
(dag) and ``session_search``'s (pipeline). Every built-in engine offers it to the model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ComalError
from ..memory import memory_search, render_recalled
from ._errors import ToolFailure
from ._model import CallContext, Effect, ToolOutput
from ._operation import LARGE_CAP, Operation

__all__ = ["MemorySearchInput", "memory_search_operation"]

_DESCRIPTION = (
    "Recall what you learned in earlier sessions with this user: facts remembered before "
    "older messages were summarized (names, dates, preferences, decisions, paths, "
    "identifiers, commands and their exit codes), notes the user asked you to remember, and "
    "the messages of your past sessions. query is words to look for (any of them may match); "
    "results whose text holds the query exactly (a file name like hello.txt) come first, and "
    "each says why it matched: [exact], [phrase] or [words: ...], the match marked «so»."
)


class MemorySearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, max_length=1_000, description="Words to look for.")
    limit: int = Field(10, ge=1, le=50, description="At most this many results.")


def _memory_search(args: MemorySearchInput, ctx: CallContext) -> ToolOutput:
    scope = ctx.scope
    try:
        found = memory_search(
            ctx.ledger, scope.tenant, scope.agent, args.query, session=scope.session,
            limit=args.limit,
        )  # fmt: skip
    except ComalError as exc:  # its code leads, as the other recall tools' refusals do
        raise ToolFailure(f"[{exc.code}] {exc}") from exc
    observed = [
        {"kind": r.kind, "id": r.id, "session": r.session,
         "match": r.match.how if r.match is not None else None}
        for r in found
    ]  # fmt: skip
    return ToolOutput(render_recalled(args.query, found), observations={"results": observed})


def memory_search_operation() -> Operation:
    return Operation(
        "memory_search",
        _DESCRIPTION,
        MemorySearchInput,
        _memory_search,
        effects=(Effect("read"),),
        inline_cap=LARGE_CAP,
    )
