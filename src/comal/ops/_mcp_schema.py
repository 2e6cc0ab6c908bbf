"""What comal makes of the input schema an MCP server sends for each of its tools.

A server is untrusted input: its ``inputSchema`` is whatever JSON it chose to send. Each schema
is either accepted (a strict pydantic model the judge validates arguments against, and the same
schema published to the model) or refused with a reason, one tool at a time, so one bad tool
never costs the server its other tools (:class:`~comal.ops.McpToolRefused`).

A schema is accepted when it is a JSON object of ``"type": "object"``, nests no deeper than
:data:`SCHEMA_DEPTH`, stores as canonical JSON, and is a valid JSON Schema for the draft it
names (2020-12 when it names none): the providers reject a request whose tool schema is not,
so a malformed one would fail every turn rather than just its own calls. Property names become
aliases of the model's fields, so any name a schema can hold (``model_dump``, ``a-b``, ``_x``)
is sent back to the server exactly; ``enum`` values of any JSON type are compared as
canonical JSON.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from ..messages import canonical_json
from ._errors import OperationDeclarationError

__all__ = ["SCHEMA_DEPTH", "model_from_schema", "schema_problem"]

# Real tool schemas nest a handful of levels; the validators below recurse, so the depth is
# checked first, without recursion.
SCHEMA_DEPTH = 40

_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": int | float,  # keep 1 as 1: the server gets the numbers the model sent
    "boolean": bool,
    "array": list[Any],
    "object": dict[str, Any],
    "null": type(None),
}


def _depth(node: Any) -> int:
    deepest, stack = 0, [(node, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > SCHEMA_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be a tool's input schema, or ``None`` when it can."""
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return 'its input schema is not a JSON Schema object ("type": "object")'
    if _depth(schema) > SCHEMA_DEPTH:
        return f"its input schema nests deeper than {SCHEMA_DEPTH} levels"
    try:
        canonical_json(schema)
    except (TypeError, ValueError) as exc:
        return f"its input schema cannot be stored as canonical JSON ({exc})"
    if not isinstance(schema.get("$schema", ""), str):
        return "its input schema's $schema is not a string"
    # jsonschema ships with the MCP SDK (which validates output schemas with it); it loads
    # only where MCP servers are configured.
    from jsonschema import Draft202012Validator, SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "the top"
        return f"its input schema is not a valid JSON Schema at {where}: {exc.message[:200]}"
    return None


def _member_of(values: list[Any]) -> AfterValidator:
    allowed = {canonical_json(v) for v in values}

    def check(value: Any) -> Any:
        if canonical_json(value) not in allowed:
            raise ValueError(f"must be one of {sorted(allowed)[:10]}")
        return value

    return AfterValidator(check)


def _field_type(schema: Mapping[str, Any]) -> Any:
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        if all(v is None or type(v) in (str, int, bool) for v in enum):
            return Literal[tuple(enum)]
        return Annotated[Any, _member_of(enum)]
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _JSON_TYPES:
        return _JSON_TYPES[kind]
    return Any  # unions and composite keywords: the server validates what we cannot express


def _field_name(key: str, index: int, taken: set[str]) -> str:
    """The Python name of a property's field: the key itself where pydantic takes it as is,
    otherwise a generated one (the key stays the alias, which is what is validated and sent)."""
    if (
        key.isidentifier()
        and not keyword.iskeyword(key)
        and not key.startswith(("_", "model_"))
        and not hasattr(BaseModel, key)
    ):
        return key
    name = f"field_{index}"
    while name in taken:
        name += "_"
    return name


def model_from_schema(name: str, schema: Mapping[str, Any]) -> type[BaseModel]:
    """A strict pydantic model for a JSON Schema object: known property types, required keys,
    no extra keys. Optional keys default to unset and are not sent. A schema whose
    ``properties`` or ``required`` are not what JSON Schema says is an
    :class:`~comal.ops.OperationDeclarationError` naming the operation."""
    props = schema.get("properties") or {}
    required = schema.get("required") or []
    if not isinstance(props, Mapping) or not isinstance(required, list):
        raise OperationDeclarationError(
            f"operation {name!r}: its schema's properties must be an object and required a "
            "list; fix the schema"
        )
    needed = {r for r in required if isinstance(r, str)}
    keys = [str(k) for k in props]
    taken = set(keys)
    fields: dict[str, Any] = {}
    for index, key in enumerate(keys):
        sub = props[key]
        kind = _field_type(sub if isinstance(sub, Mapping) else {})
        field_name = _field_name(key, index, taken)
        taken.add(field_name)
        if key in needed:
            fields[field_name] = (kind, Field(..., alias=key))
        else:
            fields[field_name] = (kind | None, Field(None, alias=key))
    config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
    )
    model: type[BaseModel] = create_model(name, __config__=config, **fields)
    return model
