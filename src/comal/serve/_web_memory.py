"""The web page's memory routes (DRV-7): the page's ``# TEXT``, ``/memory`` and ``/forget``, as
the TUI's and ``comal memory``'s, through :mod:`comal.memory`.

A route names a session only to say whose agent: the caller's tenant must own the session
(``session_of``, as every web route), and the note, the list and the forget are that session's
(tenant, agent)'s. The person is the caller the server authenticated (never read from a body),
and the two writes need the caller's CSRF token like every state-changing route. A note and a
forget are not operations of the session's house: they belong to the agent, not to one
session, and no model proposes them; each is its own sealed row naming the person and the time.
Any worker answers: the rows go straight to the shared ledger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ..ledger import LedgerBackend, MemoryNotFound
from ..memory import (
    add_note,
    forget,
    list_memories,
    memory_dict,
    memory_search,
    render_forget,
    render_note,
    render_page,
    render_recalled,
)
from ._api import ApiError, _human, handled

if TYPE_CHECKING:
    from ._web_api import _Web

__all__ = ["memory_routes"]


class NoteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=2_000, description="The fact to remember.")


class ForgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    why: str = Field("", max_length=2_000, description="Why it should be forgotten.")


async def _run(fn: Any) -> Any:
    return await anyio.to_thread.run_sync(fn)


def memory_routes(router: APIRouter, w: _Web) -> None:
    """Add the memory routes to the web router."""

    @router.post(
        "/sessions/{session_id}/memories",
        status_code=201,
        summary="Remember a note for the session's agent (the page's # TEXT)",
    )
    @handled
    async def add(request: Request, session_id: str, body: NoteBody) -> Any:
        tenant, info = await w.session_of(request, session_id)
        ledger: LedgerBackend = request.app.state.ledger
        by = _human(tenant).id
        memory, added = await _run(
            lambda: add_note(ledger, info.tenant, info.agent, body.text, by=by)
        )
        said = render_note(memory, added, undo="/forget {id} takes it back.")
        answer = {"added": added, "memory": memory_dict(memory), "text": said}
        return JSONResponse(answer, 201 if added else 200)

    @router.get(
        "/sessions/{session_id}/memories",
        summary="The session's agent's memories, newest first; q: search them (/memory)",
    )
    @handled
    async def listing(
        request: Request,
        session_id: str,
        q: Annotated[str | None, Query(max_length=1_000)] = None,
        before: Annotated[int | None, Query(ge=1)] = None,
        limit: Annotated[int, Query(ge=1, le=50)] = 20,
        forgotten: bool = False,
    ) -> dict[str, Any]:
        _, info = await w.session_of(request, session_id, changes_state=False)
        ledger: LedgerBackend = request.app.state.ledger
        if q:
            found = await _run(
                lambda: memory_search(
                    ledger, info.tenant, info.agent, q, session=info.id, limit=limit
                )
            )
            results = [r.as_dict() for r in found]
            return {"query": q, "results": results, "text": render_recalled(q, found)}
        page = await _run(
            lambda: list_memories(
                ledger, info.tenant, info.agent, before=before, limit=limit, forgotten=forgotten
            )
        )
        return {**page.as_dict(), "text": render_page(page, more="older: before={next}")}

    @router.post(
        "/sessions/{session_id}/memories/{memory_id}/forget",
        summary="Forget one of the agent's memories (recorded, never deleted: /forget)",
    )
    @handled
    async def forget_route(
        request: Request, session_id: str, memory_id: int, body: ForgetBody
    ) -> dict[str, Any]:
        tenant, info = await w.session_of(request, session_id)
        ledger: LedgerBackend = request.app.state.ledger
        by = _human(tenant).id
        try:
            done, new = await _run(
                lambda: forget(ledger, info.tenant, info.agent, memory_id, by=by, why=body.why)
            )
        except MemoryNotFound as exc:
            raise ApiError(404, exc.code, str(exc)) from exc
        forgotten = {"id": done.id, "by": done.by, "why": done.why, "at": done.created_at}
        return {"memory": memory_id, "new": new, "forgotten": forgotten,
                "text": render_forget(done, new)}  # fmt: skip
