"""``GET /v1/models`` (and ``/v1/models/{id}``): clients probe it before their first turn
(Codex, editors, the SDKs' ``models.list()``).

The answer is the upstream's own list, proxied as token counting is (the client's key passes
through, as on every route): the upstream knows what the key may use, comal does not. Only
when the upstream cannot answer (unreachable, a server error, no such route) does comal answer
from its model catalog (:func:`comal.tokens.load_catalog`): that upstream's catalogued models,
marked ``x-comal-models: catalog`` because nothing says the key may use them. The route's
protocol is read from the headers (:func:`~comal.messages.wire.protocol_for_headers`: the
Anthropic SDK and Claude Code send ``anthropic-version``), and writes the list in its shape.
"""

from __future__ import annotations

from typing import Any

from ..messages.wire import WireProtocol
from ..tokens import ModelInfo, load_catalog

__all__ = ["CATALOG_HEADER", "catalog_model", "catalog_models", "upstream_answered"]

CATALOG_HEADER = "x-comal-models"
# Statuses that mean the upstream has no models route to answer with (or could not answer).
_NO_ANSWER = frozenset({404, 405, 501})


def upstream_answered(status: int | None) -> bool:
    return status is not None and status < 500 and status not in _NO_ANSWER


def _known(protocol: WireProtocol) -> list[ModelInfo]:
    # The catalog names a model's provider as the upstream it is served by.
    seen: dict[str, ModelInfo] = {}
    for info, _ in load_catalog().values():
        if info.provider == protocol.upstream:
            seen.setdefault(info.name, info)
    return [seen[name] for name in sorted(seen)]


def _shape(protocol: WireProtocol, info: ModelInfo) -> dict[str, Any]:
    # The catalog has no release dates: 0 (the epoch) says "not known" in the field's own type.
    assert protocol.model is not None
    return protocol.model(info.name, info.provider, 0)


def catalog_models(protocol: WireProtocol) -> dict[str, Any]:
    """The catalog's models of the protocol's upstream, in the protocol's list shape."""
    assert protocol.models is not None
    return protocol.models([_shape(protocol, info) for info in _known(protocol)])


def catalog_model(protocol: WireProtocol, model_id: str) -> dict[str, Any] | None:
    """One catalogued model by its exact name, or ``None``."""
    found = next((i for i in _known(protocol) if i.name == model_id), None)
    return None if found is None else _shape(protocol, found)
