"""Approvals over the ledger; they live in :mod:`comal.agent._approvals` (the ``approve``
operation answers them), and these names stay importable from the server."""

from __future__ import annotations

from ..agent._approvals import (
    APPROVAL_ANSWER,
    APPROVAL_REQUEST,
    LedgerApprover,
    answer,
    pending,
)

__all__ = ["APPROVAL_ANSWER", "APPROVAL_REQUEST", "LedgerApprover", "answer", "pending"]
