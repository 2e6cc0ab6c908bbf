"""``--model script:PATH``: a scripted model whose position is read from the ledger.

The script is a file of replies in Anthropic Messages form, one JSON object per line (the format
of :mod:`comal.providers.script`). The k-th model call of a session gets the k-th reply, where k
counts the request records the session already holds — the agent writes one for every call that
reached the model, complete or not, in the same transaction as what the call produced. A session
resumed after a crash therefore continues the script exactly where the ledger stopped: a reply
whose effects never reached the ledger is served again, one that did is never served twice.

A script that became the session's model later (``comal -c -p ... --model script:NEW``) counts
only the requests it answered (``served``, from the session's recorded changes of model): its
first request gets its first reply.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import UserError
from .._types import ModelRequest, ModelResponse, OnEvent, replay_events
from ._format import load_script
from ._scripted import ScriptedProvider

if TYPE_CHECKING:
    from ...ledger import LedgerBackend, Scope

__all__ = ["SCRIPT_PREFIX", "ScriptEnded", "ScriptModel"]

SCRIPT_PREFIX = "script:"


class ScriptEnded(UserError):
    """``--model script:PATH`` has no reply for this call."""

    code = "SCRIPT_EXHAUSTED"


class ScriptModel:
    """A :class:`~comal.providers.Provider` answering from a script file for one session."""

    name = "scripted"

    def __init__(
        self,
        path: str | Path,
        ledger: LedgerBackend,
        scope: Scope,
        *,
        served: Callable[[], int | None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.replies = load_script(self.path)
        self.ledger = ledger
        self.scope = scope
        self.served = served

    @classmethod
    def from_spec(cls, spec: str, ledger: LedgerBackend, scope: Scope) -> ScriptModel:
        return cls(spec.removeprefix(SCRIPT_PREFIX), ledger, scope)

    def request(self, req: ModelRequest) -> ModelResponse:
        mine = self.served() if self.served is not None else None
        total = int(self.ledger.usage_totals(self.scope)["requests"] or 0)  # one count query
        k = total if mine is None else mine
        if k >= len(self.replies):
            how = (
                f"it answered {k} of the session's {total} requests since it became its model"
                if mine is not None and mine != total
                else f"the session made {total} requests"
            )
            raise ScriptEnded(
                f"the script {self.path} has {len(self.replies)} replies and session "
                f"{self.scope.session} asks for reply {k + 1} ({how}); add replies to the "
                "script (or check why the agent did not stop)"
            )
        # A one-reply ScriptedProvider renders the entry exactly as the in-process fake does,
        # errors included.
        return ScriptedProvider([self.replies[k]], model=req.model).request(req)

    def stream(self, req: ModelRequest, on_event: OnEvent) -> ModelResponse:
        response = self.request(req)
        replay_events(response, on_event)
        return response
