"""The web interface's routes: run, steer and approve an agent from a browser (SRF-1).

Every state-changing route is a human operation of the one registry on the ``api`` surface
(``prompt``, ``interrupt``, ``approve``, ``context``, ``state``, ``compact``, ``cost``,
``model``, ``effort``, ``mode``, ``name``), judged and receipted by the session's house with
the caller the server authenticated as the actor (OPS-2): the proxy key's tenant, or the local
user on a loopback server without keys. No body names an actor (extra keys are refused).

Beside the guard's ``Host`` and ``Origin`` checks (:mod:`._guard`), each of those routes needs
the ``x-comal-csrf`` header to carry the caller's token (``GET /api/web`` gives it to an
authenticated caller): a page of another origin can neither read the token nor send a custom
header without a CORS preflight, which this server never grants. The token is derived, not
drawn: HMAC-SHA256 under the ledger's secret of the caller the server authenticated (the
tenant and the key that proved it), so every worker of ``comal serve --workers N``, every
``comal serve`` on the same ledger and a restarted server accept it, and one caller's token is
no use with another's key. It changes when the ledger's secret does, and not otherwise.

Any worker answers any route: which process runs a session is decided by the session's lock
(:mod:`._web_sessions`), and the events a page follows are read from the ledger
(:mod:`._web_events`).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette.sse import EventSourceResponse

from ..context import engine_names
from ..ledger import LedgerBackend, SessionInfo
from ._api import STATUS, ApiError, _error, _human, handled
from ._views import find_session
from ._web_events import live_stream
from ._web_memory import memory_routes
from ._web_sessions import WebSessions
from ._web_views import queued_view, transcript_view, work_tree

if TYPE_CHECKING:
    from ._app import Gate, Tenant

__all__ = ["CSRF_HEADER", "check_csrf", "csrf_token", "web_router"]

T = TypeVar("T")
CSRF_HEADER = "x-comal-csrf"
_CSRF_PURPOSE = "web csrf v1"
# The human operations a page may call by name; the others have routes of their own.
COMMANDS = frozenset({"context", "state", "compact", "cost", "model", "effort", "mode", "name"})


class StartBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, max_length=200_000, description="The first prompt.")
    model: str | None = Field(None, max_length=500, description="One of GET /api/web's models.")
    engine: str | None = Field(None, max_length=100, description="limit, dag, pipeline, ...")
    mode: str | None = Field(
        None, pattern="^(read-only|ask|trusted)$", description="One of GET /api/web's modes."
    )
    effort: str | None = Field(None, max_length=40)
    workspace: str | None = Field(None, max_length=4_096, description="An allowed workspace.")


class PromptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str | None = Field(
        None, min_length=1, max_length=200_000, description="None: resume (RES-1)."
    )
    queue: bool = Field(
        False,
        description="While the agent works: after its run (Tab); false: at its next safe "
        "point (Enter).",
    )


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    granted: bool
    reason: str = Field("", max_length=2_000)
    always: bool = Field(False, description="Also allow calls like it (this subject) from now.")


def _outcome(body: dict[str, Any]) -> dict[str, Any]:
    """An operation's outcome as the answer, or its coded error as the route's."""
    if body["is_error"]:
        observed = body["observations"]
        code = str(observed.get("code") or "OPERATION_FAILED")
        raise ApiError(STATUS.get(code, 400), code, str(observed.get("message") or body["text"]))
    return body


def csrf_token(ledger: LedgerBackend, tenant: Tenant) -> str:
    """The caller's token: the same from every process that shares the ledger (see above)."""
    return ledger.derived(_CSRF_PURPOSE, f"{tenant.name}\x00{tenant.key_id or ''}")


def check_csrf(headers: dict[str, str], ledger: LedgerBackend, tenant: Tenant) -> None:
    """A state-changing request from a browser must carry the caller's token (see above)."""
    if not hmac.compare_digest(headers.get(CSRF_HEADER, ""), csrf_token(ledger, tenant)):
        raise ApiError(
            403,
            "CSRF_TOKEN",
            f"a state-changing request needs the caller's token in the {CSRF_HEADER} "
            "header; GET /api/web gives it (the web page sends it by itself)",
        )


async def _run(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn)


@dataclass(frozen=True)
class _Web:
    """Who calls, which of their sessions, and the one path of every human operation."""

    gate: Gate
    sessions: WebSessions

    async def who(self, request: Request, *, changes_state: bool) -> Tenant:
        from ._app import AuthError

        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            tenant = await _run(lambda: self.gate.tenant(headers))
        except AuthError as exc:
            raise ApiError(401, "UNAUTHORIZED", exc.message) from exc
        if changes_state:
            check_csrf(headers, self.sessions.ledger, tenant)
        return tenant

    async def session_of(
        self, request: Request, session_id: str, *, changes_state: bool = True
    ) -> tuple[Tenant, SessionInfo]:
        tenant = await self.who(request, changes_state=changes_state)
        ledger: LedgerBackend = request.app.state.ledger
        info = await _run(lambda: find_session(ledger, tenant.name, session_id))
        if info is None:
            raise ApiError(404, "NOT_FOUND", f"no session {session_id} for this tenant")
        return tenant, info

    async def steer(
        self, request: Request, session_id: str, name: str, args: dict[str, Any]
    ) -> dict[str, Any]:
        tenant, info = await self.session_of(request, session_id)
        by = _human(tenant)
        return _outcome(await _run(lambda: self.sessions.steer(info, name, args, by)))


def web_router(gate: Gate, sessions: WebSessions) -> APIRouter:
    router = APIRouter(prefix="/api", tags=["web"])
    web = _Web(gate, sessions)
    _steering_routes(router, web)
    _reading_routes(router, web)
    memory_routes(router, web)  # the page's # TEXT, /memory and /forget (DRV-7)
    return router


def _steering_routes(router: APIRouter, w: _Web) -> None:
    """The state-changing routes: each is one human operation on the ``api`` surface."""

    @router.post("/sessions", status_code=201, summary="Start an agent session in the server")
    @handled
    async def start(request: Request, body: StartBody) -> Any:
        tenant = await w.who(request, changes_state=True)
        by = _human(tenant)
        flags = {"engine": body.engine, "mode": body.mode, "effort": body.effort}
        live, outcome = await _run(
            lambda: w.sessions.start(
                tenant.name, by, body.prompt, model=body.model, workspace=body.workspace, **flags
            )
        )
        return JSONResponse({"session": live.session, **_outcome(outcome)}, 201)

    @router.post(
        "/sessions/{session_id}/prompts",
        summary="Give the agent a prompt (or resume); while it works, the prompt is queued (202)",
    )
    @handled
    async def prompt(request: Request, session_id: str, body: PromptBody) -> Any:
        args: dict[str, Any] = {} if body.prompt is None else {"prompt": body.prompt}
        if body.queue:
            args["queue"] = True
        answer = await w.steer(request, session_id, "prompt", args)
        # Queued for the running agent's next safe point: accepted, not done yet.
        return JSONResponse(answer, 202) if "queued" in answer["observations"] else answer

    @router.post("/sessions/{session_id}/interrupt", summary="Stop the agent now")
    @handled
    async def interrupt(request: Request, session_id: str) -> dict[str, Any]:
        return await w.steer(request, session_id, "interrupt", {})

    @router.post(
        "/sessions/{session_id}/approvals/{request_id}",
        summary="Answer the agent's pending approval (the approve operation)",
    )
    @handled
    async def approve(
        request: Request, session_id: str, request_id: str, body: AnswerBody
    ) -> dict[str, Any]:
        tenant, info = await w.session_of(request, session_id)
        args: dict[str, Any] = {"request": request_id, "granted": body.granted}
        args |= {"reason": body.reason} | ({"always": True} if body.always else {})
        return _outcome(await _run(lambda: w.sessions.approve(info, args, _human(tenant))))

    @router.post(
        "/sessions/{session_id}/commands/{name}",
        summary="A human operation: context, state, compact, cost, model, effort, mode, name",
    )
    @handled
    async def command(
        request: Request,
        session_id: str,
        name: str,
        args: Annotated[dict[str, Any] | None, Body()] = None,
    ) -> dict[str, Any]:
        if name not in COMMANDS:
            known = ", ".join(sorted(COMMANDS))
            raise ApiError(404, "UNKNOWN_COMMAND", f"no command {name!r}; one of {known}")
        return await w.steer(request, session_id, name, dict(args or {}))


def _reading_routes(router: APIRouter, w: _Web) -> None:
    """What the page reads: its token and choices, the transcript, asks, work, gauge, events."""

    @router.get("/web", summary="What the web page needs: its token, workspaces, models, modes")
    @handled
    async def web(request: Request) -> dict[str, Any]:
        tenant = await w.who(request, changes_state=False)
        return {
            "tenant": tenant.name,
            "actor": _human(tenant).as_dict(),
            "csrf": await _run(lambda: csrf_token(w.sessions.ledger, tenant)),
            "workspaces": await _run(w.sessions.allowed.workspaces),
            "models": await _run(w.sessions.allowed.models),
            "engines": list(engine_names()),
            # What a session started here runs unless the page picks another (serve --engine).
            "engine": w.sessions.config.engine,
            "modes": list(await _run(w.sessions.allowed.modes)),
            "mode": await _run(w.sessions.allowed.default_mode),
        }

    @router.get("/sessions/{session_id}/transcript", summary="What the person is shown, in order")
    @handled
    async def transcript(
        request: Request, session_id: str, start: Annotated[int, Query(ge=0)] = 0
    ) -> dict[str, Any]:
        _, info = await w.session_of(request, session_id, changes_state=False)
        ledger: LedgerBackend = request.app.state.ledger
        # Read before the entries: a page that follows the events after it misses nothing
        # (what happened in between may arrive twice; the next transcript settles it).
        last = await _run(lambda: ledger.record_mark(info.scope, "event"))
        lines = await _run(lambda: transcript_view(ledger, info.scope, start=start))
        queued = await _run(lambda: queued_view(ledger, info.scope))
        return {"session": session_id, "lines": lines, "queued": queued, "last_event": last}

    @router.get("/sessions/{session_id}/asks", summary="The agent's pending approvals")
    @handled
    async def asks(request: Request, session_id: str) -> dict[str, Any]:
        _, info = await w.session_of(request, session_id, changes_state=False)
        return {"session": session_id, "approvals": await _run(lambda: w.sessions.asks(info))}

    @router.get("/sessions/{session_id}/work", summary="The board and the tree of work steps")
    @handled
    async def work(request: Request, session_id: str) -> dict[str, Any]:
        _, info = await w.session_of(request, session_id, changes_state=False)
        ledger: LedgerBackend = request.app.state.ledger
        return await _run(lambda: work_tree(ledger, info.scope))

    @router.get("/sessions/{session_id}/gauge", summary="The context gauge (the status line)")
    @handled
    async def gauge(request: Request, session_id: str) -> dict[str, Any]:
        _, info = await w.session_of(request, session_id, changes_state=False)
        return await _run(lambda: w.sessions.gauge(info))

    @router.get("/sessions/{session_id}/live", summary="The session as it runs (SSE)")
    async def live_events(
        request: Request,
        session_id: str,
        after: Annotated[int | None, Query(ge=0, description="Last event seen; none: now.")] = None,
    ) -> Any:
        try:
            _, info = await w.session_of(request, session_id, changes_state=False)
        except ApiError as exc:
            return _error(exc.status, exc.code, exc.message)
        ledger: LedgerBackend = request.app.state.ledger
        working = partial(w.sessions.working, info)
        return EventSourceResponse(
            live_stream(request, ledger, info.scope, after, working), ping=15
        )
