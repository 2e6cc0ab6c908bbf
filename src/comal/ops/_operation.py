"""Operations and their one registry (OPS-1); the model catalog is a projection of it.

An :class:`Operation` declares its name, input model (a pydantic model whose JSON Schema is the
contract, versioned), effects, audience, surfaces and handler. The model's tool catalog, the CLI
listing and the TUI's slash commands are all read from one :class:`Registry`, and every surface
runs an operation through the same judge.

A catalog is stable in order and bytes: operations sorted by name, schemas cleaned of pydantic's
``title`` noise, serialised as canonical JSON. Its :attr:`Catalog.digest` covers names,
descriptions, schemas and contract versions; it belongs to the cached prompt prefix and to the
token anchor key, so any change to a contract changes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from ..ledger import LedgerBackend, Scope
from ..messages import canonical_json, sha256_hex
from ._errors import OperationDeclarationError, OpsError
from ._model import (
    READ_ONLY_EFFECTS,
    SURFACES,
    Audience,
    CallContext,
    Effect,
    PlannedWrite,
    Surface,
    ToolOutput,
)
from ._recovery import RecoveryAdapter
from ._workspace import Workspace

__all__ = [
    "DEFAULT_CAP",
    "HARD_CAP",
    "LARGE_CAP",
    "Catalog",
    "CatalogFormat",
    "FinishGate",
    "Handler",
    "Intent",
    "Operation",
    "Planner",
    "Registry",
    "SubjectKind",
]

# PIP-3: inline caps in characters; file reads and MCP get the larger one; nothing exceeds 100k.
DEFAULT_CAP = 8_000
LARGE_CAP = 15_000
HARD_CAP = 100_000

Handler = Callable[[Any, CallContext], ToolOutput]
Planner = Callable[[Any, CallContext], PlannedWrite]
# PLG-2: what a call means to do, computed (reading only) before its durable preparation and
# recorded in it, so that a fresh observation after a crash can prove what it did.
Intent = Callable[[Any, CallContext], Mapping[str, Any]]
# The seam of a finish: what still keeps a session from finishing, or ``None``.
FinishGate = Callable[[LedgerBackend, Scope], str | None]
SubjectKind = Literal["path", "command", "text"]
CatalogFormat = Literal["anthropic", "openai"]

# Both providers accept tool names matching this; anything else would fail at request time.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def _clean_schema(node: Any, *, names: bool = False) -> Any:
    """Drop pydantic's generated ``title`` keywords (tokens without meaning), never a property
    that happens to be called ``title``."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if names:
                out[key] = _clean_schema(value)
            elif key == "title" and isinstance(value, str):
                continue
            else:
                out[key] = _clean_schema(value, names=key in _SCHEMA_MAPS)
        return out
    if isinstance(node, list):
        return [_clean_schema(v) for v in node]
    return node


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation. Exactly one of ``handler`` and ``plan_write`` is given: a planned write
    is executed by the house itself, so its preparation is recorded before any byte moves.

    ``subject`` gives the string that rule patterns match (the command of ``Bash``, the path of
    ``Write``); ``paths`` gives the path arguments that must stay inside the workspace.
    ``schema`` overrides the published JSON Schema (MCP tools publish the server's own).
    ``sandboxed`` says the handler starts processes that must run in the OS sandbox: without a
    usable one, the judge refuses calls no human approved (``sandbox:unavailable``).

    Recovery (PLG-2): ``intent`` computes, before anything with effects runs, what the call
    means to do; the house records it in the call's durable preparation and hands it to the
    handler (:attr:`CallContext.intent`). ``recover`` is the adapter that, after a crash, turns
    such a preparation without a receipt into a status by a fresh observation
    (:class:`~comal.ops.RecoveryAdapter`); without one the call stays ``uncertain``.
    ``finish_gate`` says what keeps a session from finishing (``finish_call`` refuses while it
    answers a reason); ``closes`` marks an operation whose passing result closes the session,
    as ``finish_call``'s does. ``asks``: a human approves each call unless an allow rule names
    the operation, in every mode (a publish that cannot be taken back).
    """

    name: str
    description: str
    input: type[BaseModel]
    handler: Handler | None = None
    plan_write: Planner | None = None
    effects: tuple[Effect, ...] = (Effect("none"),)
    audience: Audience = "both"
    surfaces: frozenset[Surface] = frozenset(SURFACES)
    version: int = 1
    subject: Callable[[Any], str | None] | None = None
    subject_kind: SubjectKind = "text"
    paths: Callable[[Any], Sequence[str]] | None = None
    inline_cap: int = DEFAULT_CAP
    schema: Mapping[str, Any] | None = None
    sandboxed: bool = False
    intent: Intent | None = None
    recover: RecoveryAdapter | None = None
    finish_gate: FinishGate | None = None
    closes: bool = False
    asks: bool = False
    parameters: dict[str, Any] = field(init=False, repr=False, compare=False)
    contract: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not _NAME.match(self.name):
            problems.append("its name must match ^[A-Za-z0-9_-]{1,64}$ (provider tool names)")
        if (self.handler is None) == (self.plan_write is None):
            problems.append("give exactly one of handler and plan_write")
        if self.input.model_config.get("extra") != "forbid":
            problems.append("its input model must forbid extra keys (model_config extra='forbid')")
        if not self.surfaces or not self.surfaces <= set(SURFACES):
            problems.append(f"surfaces must be a non-empty subset of {SURFACES}")
        if self.audience == "human" and "model" in self.surfaces:
            problems.append("a human-audience operation cannot be on the model surface (OPS-6)")
        if self.audience == "model" and "model" not in self.surfaces:
            problems.append("a model-audience operation must be on the model surface")
        if not 0 < self.inline_cap <= HARD_CAP:
            problems.append(f"inline_cap must be in 1..{HARD_CAP}")
        if self.intent is not None and (self.handler is None or self.read_only):
            problems.append("an intent is recorded only for a handler with effects")
        if self.version < 1 or not self.effects:
            problems.append("version must be >= 1 and effects non-empty")
        if problems:
            raise OperationDeclarationError(
                f"operation {self.name!r}: " + "; ".join(problems) + "; fix its declaration"
            )
        raw = dict(self.schema) if self.schema is not None else self.input.model_json_schema()
        schema = _clean_schema(raw)
        schema["additionalProperties"] = False  # the judge forbids extra keys; say so
        object.__setattr__(self, "parameters", schema)
        digest = sha256_hex(canonical_json(schema))[:16]
        object.__setattr__(self, "contract", f"{self.name}@v{self.version}:{digest}")

    @property
    def read_only(self) -> bool:
        return all(e.kind in READ_ONLY_EFFECTS for e in self.effects)

    def effects_for(
        self, args: Any, workspace: Workspace | None, located: Mapping[str, str] | None = None
    ) -> tuple[Effect, ...]:
        """The declared effects with this call's paths filled in (workspace-relative);
        ``located`` gives paths already resolved, so a racing rename cannot change them."""
        if self.paths is None:
            return self.effects
        rels: list[str] = []
        for raw in self.paths(args):
            if located is not None and raw in located:
                rels.append(located[raw])
            elif workspace is None:
                rels.append(raw)
            else:
                try:
                    rels.append(workspace.locate(raw))
                except OpsError:
                    rels.append(raw)
        return tuple(
            Effect(e.kind, tuple(rels) or e.paths, e.hosts) if e.kind in ("read", "write") else e
            for e in self.effects
        )


@dataclass(frozen=True, slots=True)
class Catalog:
    """The operations one surface offers, in a fixed order with fixed bytes."""

    surface: Surface
    operations: tuple[Operation, ...]

    def tools(self, format: CatalogFormat = "anthropic") -> list[dict[str, Any]]:
        if format == "anthropic":
            return [
                {"name": o.name, "description": o.description, "input_schema": o.parameters}
                for o in self.operations
            ]
        if format == "openai":
            return [
                {
                    "type": "function",
                    "function": {
                        "name": o.name,
                        "description": o.description,
                        "parameters": o.parameters,
                    },
                }
                for o in self.operations
            ]
        raise OperationDeclarationError(f"unknown catalog format {format!r}; use anthropic|openai")

    def json(self, format: CatalogFormat = "anthropic") -> str:
        """The exact catalog text: canonical JSON (sorted keys, no spaces)."""
        return canonical_json(self.tools(format))

    @property
    def digest(self) -> str:
        neutral = [
            {
                "name": o.name,
                "description": o.description,
                "input_schema": o.parameters,
                "contract": o.contract,
            }
            for o in self.operations
        ]
        return sha256_hex(canonical_json(neutral))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.operations)

    def contract(self, name: str) -> str | None:
        return next((o.contract for o in self.operations if o.name == name), None)


class Registry:
    """The one registry of operations; every surface is a projection of it (OPS-1)."""

    def __init__(self, operations: Iterable[Operation] = ()) -> None:
        self._ops: dict[str, Operation] = {}
        self.add_all(operations)

    def add(self, operation: Operation) -> Operation:
        if operation.name in self._ops:
            raise OperationDeclarationError(
                f"an operation named {operation.name!r} is already registered; names are unique"
            )
        slash = operation.name.lower()
        if any(o.name.lower() == slash for o in self._ops.values()):
            raise OperationDeclarationError(
                f"{operation.name!r} would share the slash command /{slash} with another operation"
            )
        self._ops[operation.name] = operation
        return operation

    def add_all(self, operations: Iterable[Operation]) -> None:
        for op in operations:
            self.add(op)

    def get(self, name: str) -> Operation | None:
        return self._ops.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._ops

    def __iter__(self) -> Iterator[Operation]:
        return iter(sorted(self._ops.values(), key=lambda o: o.name))

    def __len__(self) -> int:
        return len(self._ops)

    def for_surface(self, surface: Surface) -> tuple[Operation, ...]:
        # Human-audience controls never reach the model, whatever their surfaces say (OPS-6).
        return tuple(
            o
            for o in self
            if surface in o.surfaces and not (surface == "model" and o.audience == "human")
        )

    def catalog(self, surface: Surface = "model") -> Catalog:
        return Catalog(surface, self.for_surface(surface))

    def slash_commands(self) -> dict[str, str]:
        """The TUI projection: ``/name`` → operation name."""
        return {f"/{o.name.lower()}": o.name for o in self.for_surface("tui")}
