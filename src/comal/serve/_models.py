"""``GET /v1/models`` (and ``/v1/models/{id}``): clients probe it before their first turn
(Codex, editors, the SDKs' ``models.list()``).

The answer is the upstream's own list, proxied as token counting is (the client's key passes
through, as on every route): the upstream knows what the key may use, comal does not. Only
when the upstream cannot answer (unreachable, a server error, no such route) does comal answer
from its model catalog (:func:`comal.tokens.load_catalog`): that provider's catalogued models,
marked ``x-comal-models: catalog`` because nothing says the key may use them. The route's
provider is read from the headers: the Anthropic SDK and Claude Code send ``anthropic-version``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..tokens import ModelInfo, load_catalog
from ._wire import Protocol

__all__ = [
    "CATALOG_HEADER",
    "catalog_model",
    "catalog_models",
    "models_protocol",
    "upstream_answered",
]

CATALOG_HEADER = "x-comal-models"
# Statuses that mean the upstream has no models route to answer with (or could not answer).
_NO_ANSWER = frozenset({404, 405, 501})
_PROVIDER = {"anthropic": "anthropic", "openai_chat": "openai"}
# The catalog has no release dates; the epoch says "not known" in the field's own type.
_EPOCH = "1970-01-01T00:00:00Z"


def models_protocol(headers: Mapping[str, str]) -> Protocol:
    return "anthropic" if "anthropic-version" in headers else "openai_chat"


def upstream_answered(status: int | None) -> bool:
    return status is not None and status < 500 and status not in _NO_ANSWER


def _known(protocol: Protocol) -> list[ModelInfo]:
    provider = _PROVIDER.get(protocol, "openai")
    seen: dict[str, ModelInfo] = {}
    for info, _ in load_catalog().values():
        if info.provider == provider:
            seen.setdefault(info.name, info)
    return [seen[name] for name in sorted(seen)]


def _shape(protocol: Protocol, info: ModelInfo) -> dict[str, Any]:
    if protocol == "anthropic":
        return {"type": "model", "id": info.name, "display_name": info.name, "created_at": _EPOCH}
    return {"id": info.name, "object": "model", "created": 0, "owned_by": info.provider}


def catalog_models(protocol: Protocol) -> dict[str, Any]:
    """The catalog's models of the route's provider, in that provider's list shape."""
    data = [_shape(protocol, info) for info in _known(protocol)]
    if protocol == "anthropic":
        first = data[0]["id"] if data else None
        last = data[-1]["id"] if data else None
        return {"data": data, "has_more": False, "first_id": first, "last_id": last}
    return {"object": "list", "data": data}


def catalog_model(protocol: Protocol, model_id: str) -> dict[str, Any] | None:
    """One catalogued model by its exact name, or ``None``."""
    found = next((i for i in _known(protocol) if i.name == model_id), None)
    return None if found is None else _shape(protocol, found)
