"""placeholder"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter


def api_router(gate: Any) -> APIRouter:
    return APIRouter(prefix="/api")
