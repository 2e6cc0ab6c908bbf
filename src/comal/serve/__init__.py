"""``comal serve``: the proxy, the HTTP API and the dashboard, in one ASGI application."""

from ._app import Tenant, create_app
from ._approvals import APPROVAL_ANSWER, APPROVAL_REQUEST, LedgerApprover
from ._config import ServeConfig
from ._proxy import Forward, ProxyService

__all__ = [
    "APPROVAL_ANSWER",
    "APPROVAL_REQUEST",
    "Forward",
    "LedgerApprover",
    "ProxyService",
    "ServeConfig",
    "Tenant",
    "create_app",
]
