"""What the two OpenAI protocols (Chat Completions, Responses) share: error bodies, the replies
to injected failures, the client's name for its conversation, the model list, the upstream and
its key header (:data:`openai_protocol` makes a protocol with these parts).

Errors are ``{"error": {"message", "type", "param", "code"}}``; OpenAI-compatible servers shape
a context-length error their own way (``context_length/vllm``, ``context_length/llamacpp``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any, Final

from ._protocol import WireProtocol

__all__ = ["openai_failures", "openai_protocol"]

_TYPES: Final = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "forbidden"),
    404: ("invalid_request_error", "not_found"),
    408: ("invalid_request_error", "request_timeout"),
    413: ("invalid_request_error", "request_too_large"),
    500: ("server_error", None),
    502: ("server_error", "upstream_unreachable"),
    504: ("server_error", "upstream_timeout"),
}

# kind -> (status, error type, code, message)
_FAILURES: Final[dict[str, tuple[int, str, str | None, str]]] = {
    "context_length": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 131072 tokens. Please reduce the length of the messages.",
    ),
    "rate_limit": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests. Please try again in 20ms.",
    ),
    "server": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    "overloaded": (
        503,
        "server_error",
        None,
        "The engine is currently overloaded, please try again later",
    ),
    "bad_request": (400, "invalid_request_error", None, "Invalid value for 'tool_choice'."),
    "auth": (401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
}

# Context-length errors as OpenAI-compatible servers send them.
_COMPATIBLE: Final[dict[str, dict[str, Any]]] = {
    "vllm": {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length "
        "of the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
    "llamacpp": {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5120,
            "n_ctx": 4096,
        }
    },
}


def openai_error(status: int, message: str) -> dict[str, Any]:
    kind, code = _TYPES.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def openai_failures(
    context_param: str, context_message: str | None = None
) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """The injected failures' replies; the context-length one names ``context_param``."""
    out: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for name, (status, kind, code, message) in _FAILURES.items():
        param = None
        if name == "context_length":
            param, message = context_param, context_message or message
        error = {"message": message, "type": kind, "param": param, "code": code}
        out[name] = (status, {"error": error})
    for flavor, body in _COMPATIBLE.items():
        out[f"context_length/{flavor}"] = (400, json.loads(json.dumps(body)))
    return out


def openai_client_session(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """Codex's ``prompt_cache_key``, or its ``session-id`` / ``conversation_id`` header."""
    cache_key = body.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key:
        return cache_key
    return headers.get("session-id") or headers.get("conversation_id")


def openai_model(name: str, owner: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": owner}


def openai_models(data: list[dict[str, Any]]) -> dict[str, Any]:
    return {"object": "list", "data": data}


def openai_refuses(body: Mapping[str, Any]) -> str | None:
    return None if "model" in body else "model: Field required"


# A protocol of OpenAI's API: the parts above, the ``openai`` upstream with its key as a bearer
# token, the request id in ``x-request-id``, the session's instructions under ``instructions``.
openai_protocol: Final = partial(
    WireProtocol,
    error=openai_error,
    upstream="openai",
    auth=("authorization", "Bearer "),
    request_id="x-request-id",
    client="openai-client",
    system_key="instructions",
    client_session=openai_client_session,
    refuses=openai_refuses,
    model=openai_model,
    models=openai_models,
)
