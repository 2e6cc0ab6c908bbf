"""The limit engine's identity in what it stores, and the state one assembly hands the next."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ENGINE_NAME", "ENGINE_VERSION", "EngineState"]

# Written into every checkpoint's meta: a checkpoint from another engine or version carries no
# work state this one may fold into (it is still a valid base for the view).
ENGINE_NAME = "comal.limit"
ENGINE_VERSION = 1


@dataclass(frozen=True, slots=True)
class EngineState:
    """What one assembly hands the next: the run of derivations that saved too little (LIM-5).

    References need no state (see :mod:`._stage_refs`); the streak is also written into every
    proposed checkpoint's meta, so a resumed process that passes no state reads it back from
    the ledger.
    """

    low_saving_streak: int = 0
