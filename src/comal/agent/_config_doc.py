"""What the configuration's pydantic models say about each key: its type, default, allowed range
and description — for error messages (CFG-1: a bad value names the key and the range it must
be in) and for the configuration reference (``_config_reference``).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator, Sequence
from typing import Any, Literal, TypeAlias, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = ["Row", "allowed", "describe_field", "field_rows", "model_of"]

_NONE = type(None)
Row: TypeAlias = tuple[str, str, str, str, str]


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """``annotation`` without ``| None`` (and whether it had it)."""
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not _NONE]
        optional = len(args) < len(get_args(annotation))
        if len(args) == 1:
            return args[0], optional
    return annotation, False


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1_000:
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def describe_field(info: FieldInfo) -> str | None:
    """The allowed values of one field, in words (``1..10,000``, ``one of a, b``), or
    ``None`` when any value of its type is allowed."""
    annotation, optional = _unwrap(info.annotation)
    if get_origin(annotation) is Literal:
        text = "one of " + ", ".join(str(a) for a in get_args(annotation))
        return text + (" (or null)" if optional else "")
    low: Any = None
    high: Any = None
    low_open = high_open = False
    min_len = max_len = None
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            low = item.ge
        elif isinstance(item, annotated_types.Gt):
            low, low_open = item.gt, True
        elif isinstance(item, annotated_types.Le):
            high = item.le
        elif isinstance(item, annotated_types.Lt):
            high, high_open = item.lt, True
        elif isinstance(item, annotated_types.MinLen):
            min_len = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            max_len = item.max_length
    parts = []
    if low is not None or high is not None:
        lo = "" if low is None else f"{'>' if low_open else ''}{_number(low)}"
        hi = "" if high is None else f"{'<' if high_open else ''}{_number(high)}"
        if low is not None and high is not None:
            parts.append(f"{lo}..{hi}")
        elif low is not None:
            parts.append(f"{'>' if low_open else '≥'} {_number(low)}")
        else:
            parts.append(f"{'<' if high_open else '≤'} {_number(high)}")
    sized = (list, tuple, set, frozenset, dict)
    unit = "items" if get_origin(annotation) in sized else "characters"
    if min_len and max_len:
        parts.append(f"{min_len}..{_number(max_len)} {unit}")
    elif max_len:
        parts.append(f"at most {_number(max_len)} {unit}")
    elif min_len:
        parts.append("non-empty")
    if annotation is bool:
        parts.append("true or false")
    if not parts:
        return None
    return "; ".join(parts) + (" (or null)" if optional and annotation is not bool else "")


def model_of(annotation: Any) -> type[BaseModel] | None:
    annotation, _ = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def allowed(model: type[BaseModel], loc: Sequence[str | int]) -> str | None:
    """The allowed values of the field at ``loc`` (a pydantic error location) in ``model``."""
    current: type[BaseModel] | None = model
    i = 0
    while current is not None and i < len(loc):
        key = loc[i]
        if not isinstance(key, str) or key not in current.model_fields:
            return None
        info = current.model_fields[key]
        if i == len(loc) - 1:
            return describe_field(info)
        annotation, _ = _unwrap(info.annotation)
        nested = model_of(annotation)
        if nested is not None:
            current, i = nested, i + 1
        elif get_origin(annotation) is dict:
            # ``dict[str, Model]`` (agents.NAME...): skip the key, go on in the value model.
            args = get_args(annotation)
            current, i = (model_of(args[1]) if len(args) == 2 else None), i + 2
        else:
            return describe_field(info)  # an item of a list: the list's own constraints
    return None


def _type_name(annotation: Any) -> str:
    annotation, optional = _unwrap(annotation)
    origin = get_origin(annotation)
    if origin is Literal:
        name = "string"
    elif origin in (list, tuple, set, frozenset):
        name = "list"
    elif origin is dict:
        name = "mapping"
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        name = "section"
    elif annotation in (int, float, str, bool):
        name = {int: "integer", float: "number", str: "string", bool: "boolean"}[annotation]
    else:
        name = "value"
    return name + (" or null" if optional else "")


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value: Any = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "(required)"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, (set, frozenset)):
        value = sorted(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"' if value else '""'
    if isinstance(value, (list, dict)) and not value:
        return "[]" if isinstance(value, list) else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return _number(value) if isinstance(value, (int, float)) else str(value)


def field_rows(model: type[BaseModel], prefix: str = "") -> Iterator[Row]:
    """(key, type, default, allowed, description) for every field of ``model``, nested
    sections flattened with dotted keys; fields excluded from dumps are left out."""
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        key = f"{prefix}{name}"
        nested = model_of(info.annotation)
        if nested is not None:
            yield from field_rows(nested, key + ".")
            continue
        description = " ".join((info.description or "").split())
        yield (
            key,
            _type_name(info.annotation),
            _default(info),
            describe_field(info) or "",
            description,
        )
