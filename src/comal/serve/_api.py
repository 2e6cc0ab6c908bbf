"""The HTTP API (JSON; the schema is served at ``/openapi.json``, browsable in the dashboard).

Handlers authenticate the caller (:class:`~comal.serve._app.Gate`), then call the views in
:mod:`comal.serve._views` in a worker thread; an approval is answered by the ``approve``
operation, judged and receipted (:meth:`~comal.serve._web_sessions.WebSessions.approve`), and
needs the CSRF token as every state-changing route does. Errors
are ``{"error": {"code", "message"}}`` with a fitting status.
"""

from __future__ import annotations

import asyncio
import functools
import getpass
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette.sse import EventSourceResponse

from ..errors import UserError
from ..ledger import LedgerBackend, SessionInfo
from ..ops import Actor
from ._views import (
    entries_view,
    find_session,
    pending_approvals,
    records_view,
    session_view,
    sessions_view,
    snapshot,
    turns_view,
)

if TYPE_CHECKING:
    from ._app import Gate, Tenant

__all__ = ["Answer", "api_router"]

T = TypeVar("T")


class Answer(BaseModel):
    """A human's answer to a pending approval. Who answers is the authenticated caller; the
    body cannot name anyone (extra keys are refused, OPS-2)."""

    model_config = ConfigDict(extra="forbid")

    granted: bool = Field(description="True approves the call, false refuses it.")
    reason: str = Field("", max_length=2000, description="Why, for the receipt.")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status)


# Coded errors whose HTTP status is not 400.
STATUS = {
    "NOT_FOUND": 404,
    "WORKSPACE_NOT_ALLOWED": 403,
    "MODEL_NOT_ALLOWED": 403,
    "MODE_NOT_ALLOWED": 403,
    "AGENT_BUSY": 409,
    "SESSION_LOCKED": 409,
    "OWNER_NOT_ANSWERING": 503,
    "APPROVAL_NOT_PENDING": 409,
    "ALWAYS_NOT_OFFERED": 409,
}


def handled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every route's coded errors in the API's JSON shape (FastAPI reads the wrapped
    signature)."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except ApiError as exc:
            return _error(exc.status, exc.code, exc.message)
        except UserError as exc:  # a human operation's failure too (HumanOperationFailed)
            return _error(STATUS.get(exc.code, 400), exc.code, str(exc))

    return wrapper


def _human(tenant: Tenant) -> Actor:
    """The host-bound identity of an API caller (never read from the request body)."""
    if tenant.key_id is None:
        try:
            user = getpass.getuser() or "local"
        except (KeyError, OSError):
            user = "local"
        return Actor.user(f"{tenant.name}:{user}")
    return Actor.user(tenant.actor_id)


def api_router(gate: Gate) -> APIRouter:
    router = APIRouter(prefix="/api", tags=["api"])

    def led(request: Request) -> LedgerBackend:
        ledger: LedgerBackend = request.app.state.ledger
        return ledger

    async def who(request: Request) -> Tenant:
        from ._app import AuthError

        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            return await anyio.to_thread.run_sync(gate.tenant, headers)
        except AuthError as exc:
            raise ApiError(401, "UNAUTHORIZED", exc.message) from exc

    async def run(fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn)

    async def session_of(request: Request, session_id: str) -> tuple[Tenant, SessionInfo]:
        tenant = await who(request)
        info = await run(lambda: find_session(led(request), tenant.name, session_id))
        if info is None:
            raise ApiError(404, "NOT_FOUND", f"no session {session_id} for this tenant")
        return tenant, info

    @router.get("/sessions", summary="List sessions (newest first)")
    @handled
    async def list_sessions(
        request: Request,
        status: Annotated[str | None, Query(description="active | finished")] = None,
        agent: Annotated[str | None, Query(description="claude-code, codex, ...")] = None,
        q: Annotated[str | None, Query(description="Text in the id, title or model.")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    ) -> dict[str, Any]:
        tenant = await who(request)
        rows = await run(
            lambda: sessions_view(
                led(request), tenant.name, status=status, agent=agent, q=q, limit=limit
            )
        )
        return {"tenant": tenant.name, "sessions": rows}

    @router.get("/sessions/{session_id}", summary="One session: totals, meta, children")
    @handled
    async def get_session(request: Request, session_id: str) -> dict[str, Any]:
        _, info = await session_of(request, session_id)
        return await run(lambda: session_view(led(request), info))

    @router.get("/sessions/{session_id}/entries", summary="A session's entries by seq")
    @handled
    async def get_entries(
        request: Request,
        session_id: str,
        start: Annotated[int, Query(ge=0)] = 0,
        end: Annotated[int | None, Query(ge=0)] = None,
        limit: Annotated[int, Query(ge=1, le=5000)] = 500,
    ) -> dict[str, Any]:
        _, info = await session_of(request, session_id)
        rows = await run(
            lambda: entries_view(led(request), info.scope, start=start, end=end, limit=limit)
        )
        return {"session": session_id, "entries": rows}

    @router.get(
        "/sessions/{session_id}/turns",
        summary="Per request: what the engine sent against the full history",
    )
    @handled
    async def get_turns(request: Request, session_id: str) -> dict[str, Any]:
        _, info = await session_of(request, session_id)
        return {
            "session": session_id,
            "turns": await run(lambda: turns_view(led(request), info.scope)),
        }

    for table in ("receipts", "summaries", "events", "checkpoints"):

        def make(table: str) -> Callable[..., Any]:
            async def get_records(
                request: Request,
                session_id: str,
                kind: Annotated[list[str] | None, Query(description="Event kinds.")] = None,
            ) -> dict[str, Any]:
                _, info = await session_of(request, session_id)
                rows = await run(
                    lambda: records_view(led(request), info.scope, table.rstrip("s"), kind)
                )
                return {"session": session_id, table: rows}

            get_records.__name__ = f"get_{table}"
            return handled(get_records)

        router.add_api_route(
            f"/sessions/{{session_id}}/{table}",
            make(table),
            methods=["GET"],
            summary=f"A session's {table}",
        )

    @router.get("/approvals", summary="Pending ask judgments of running agents")
    @handled
    async def list_approvals(request: Request) -> dict[str, Any]:
        tenant = await who(request)
        return {"approvals": await run(lambda: pending_approvals(led(request), tenant.name))}

    @router.post(
        "/approvals/{session_id}/{request_id}",
        summary="Answer a pending approval as the authenticated human (the approve operation)",
    )
    @handled
    async def answer_approval(
        request: Request, session_id: str, request_id: str, body: Answer
    ) -> dict[str, Any]:
        from ._web_api import check_csrf

        tenant, info = await session_of(request, session_id)
        headers = {k.lower(): v for k, v in request.headers.items()}
        await run(lambda: check_csrf(headers, led(request), tenant))
        by = _human(tenant)
        args = {"request": request_id, "granted": body.granted, "reason": body.reason}
        outcome = await run(lambda: request.app.state.web.approve(info, args, by))
        observed = outcome["observations"]
        if outcome["is_error"]:
            code = str(observed.get("code") or "OPERATION_FAILED")
            raise ApiError(409, code, str(observed.get("message") or outcome["text"]))
        found: dict[str, Any] = dict(observed["answer"])
        return found

    @router.get("/events", summary="Live changes (server-sent events: sessions, approvals)")
    async def events(request: Request, interval: float = 0.5) -> Any:
        try:
            tenant = await who(request)
        except ApiError as exc:
            return _error(exc.status, exc.code, exc.message)
        ledger = led(request)

        async def stream() -> AsyncIterator[dict[str, str]]:
            last: dict[str, Any] = {}
            while True:
                now = await run(lambda: snapshot(ledger, tenant.name))
                if now != last:
                    changed = [
                        sid
                        for sid, v in now["sessions"].items()
                        if last.get("sessions", {}).get(sid) != v
                    ]
                    payload = {"changed": changed, "approvals": now["approvals"]}
                    yield {"event": "change", "data": json.dumps(payload)}
                    last = now
                if await request.is_disconnected():
                    return
                await asyncio.sleep(max(interval, 0.05))

        return EventSourceResponse(stream(), ping=15)

    return router
