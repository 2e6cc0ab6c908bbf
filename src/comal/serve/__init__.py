"""``comal serve``: the proxy, the HTTP API and the dashboard, in one ASGI application.

- :func:`create_app` builds the application from a :class:`ServeConfig` (and a ledger);
  ``comal serve`` runs it with uvicorn.
- :class:`ProxyService` is the service layer the proxy routes call.
- :class:`LedgerApprover` answers an agent's ``ask`` judgments from approvals written to the
  ledger by the HTTP API (events :data:`APPROVAL_REQUEST` / :data:`APPROVAL_ANSWER`).
- Before any route, :mod:`._guard` refuses foreign ``Host`` names (DNS rebinding),
  cross-origin browser requests and keys in URLs, and :mod:`._limits` bounds slow and idle
  clients; errors a client gets have stable codes (:mod:`._errors`).
- Event kinds the proxy writes: :data:`INSTRUCTIONS_EVENT` (a session's system prompt and tools
  when they change), :data:`INTERRUPTED_EVENT` (a reply that did not finish),
  :data:`RECALL_EVENT` (the entries of the proxy's own recall steps), and :data:`REPLAY_EVENT`
  (a client's retry given the reply already stored, without an upstream call).
"""

from ._app import Tenant, create_app
from ._approvals import APPROVAL_ANSWER, APPROVAL_REQUEST, LedgerApprover
from ._config import ServeConfig
from ._proxy import Forward, ProxyService
from ._record import INSTRUCTIONS_EVENT, INTERRUPTED_EVENT
from ._sessions import RECALL_EVENT, REPLAY_EVENT

__all__ = [
    "APPROVAL_ANSWER",
    "APPROVAL_REQUEST",
    "INSTRUCTIONS_EVENT",
    "INTERRUPTED_EVENT",
    "RECALL_EVENT",
    "REPLAY_EVENT",
    "Forward",
    "LedgerApprover",
    "ProxyService",
    "ServeConfig",
    "Tenant",
    "create_app",
]
