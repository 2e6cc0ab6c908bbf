"""A request body read whole, its depth bounded (issue 18): JSON nested deeper than any real
request is refused with :class:`~comal.serve._errors.JSONTooDeep`, never a crash.

A conversation's items are walked as they are read (:class:`~comal.serve._wire.ItemCache`):
every request resends the whole history, and an item read before was walked then (the same
JSON nests as deep), so only the rest of the body and the new items are walked each time.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from ..errors import InputError
from ._errors import JSONTooDeep

__all__ = ["ITEM_DEPTH", "MAX_DEPTH", "load_body", "too_deep", "too_deep_error"]

# Deeper than any real request (tool schemas and arguments nest a dozen levels), well inside
# what the JSON libraries below handle without recursing out of the stack (orjson writes 254).
MAX_DEPTH = 128


# Where a conversation's items sit in a body: the body, its conversation array, the item.
ITEM_DEPTH = 3  # read by the item cache


def too_deep_error() -> JSONTooDeep:
    return JSONTooDeep(
        f"the request body nests deeper than {MAX_DEPTH} levels; no model request needs "
        "that, so it is refused before anything reads it further"
    )


def too_deep(value: object, depth: int = 1, *, skip: str | None = None) -> bool:
    """Whether ``value``, at ``depth`` in its body, nests deeper than :data:`MAX_DEPTH`, walked
    without recursion; ``skip``: a key of ``value`` not walked (the conversation, whose items
    are walked as they are read)."""
    stack: list[tuple[dict[str, Any] | list[Any], int]] = []
    if isinstance(value, dict) and skip is not None and isinstance(value.get(skip), list):
        value = {k: v for k, v in value.items() if k != skip}
    if isinstance(value, (dict, list)):
        stack.append((value, depth))
    while stack:
        node, depth = stack.pop()
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, (dict, list)):
                if depth >= MAX_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


def load_body(raw: bytes, conversation: str | None = None) -> Any:
    """A request body's JSON, its depth bounded (:data:`MAX_DEPTH`): refused, never a crash.
    ``conversation``: the key of the array whose items the caller reads through
    :data:`ITEMS`, which bounds their depth (a resent history is not walked again).

    orjson stops by itself at 1,024 levels and never recurses on the C stack; the standard
    library reads only what orjson refuses for another reason (lone surrogate escapes, which
    real tool output holds), and the depth it reaches is then below orjson's limit.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "recursion" in str(exc).lower():
            raise JSONTooDeep(f"the request body nests deeper than {MAX_DEPTH} levels") from exc
        try:
            value = json.loads(raw)
        except RecursionError as deep:
            raise JSONTooDeep(f"the request body nests deeper than {MAX_DEPTH} levels") from deep
        except (ValueError, UnicodeDecodeError) as bad:
            raise InputError(f"the request body is not JSON ({bad})") from bad
    if too_deep(value, skip=conversation):
        raise too_deep_error()
    return value
