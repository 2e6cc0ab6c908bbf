"""Executing the maintenance engines plan (one layer above :mod:`comal.context`).

Engines are pure: :meth:`~comal.context.Engine.plan` only says what is due, as
:class:`~comal.context.Job` values. This package does it — against the ledger
(:func:`execute`, each job in its own transaction) or in memory for a replay
(:func:`memory_executor`) — with whatever I/O a job needs.
"""

from ._execute import JobFailed, execute, memory_executor

__all__ = ["JobFailed", "execute", "memory_executor"]
