"""The public surface of comal.serve is pinned (a change is a decision, not an accident)."""

from __future__ import annotations

import comal.serve


def test_serve_exports() -> None:
    assert sorted(comal.serve.__all__) == sorted(
        [
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
    )
    for name in comal.serve.__all__:
        assert getattr(comal.serve, name) is not None
