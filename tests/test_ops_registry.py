"""One registry, projected to every surface; catalogs stable in order and bytes (OPS-1, OPS-6)."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ConfigDict

import comal.ops
from comal.ops import (
    HUMAN_CONTROLS,
    CallContext,
    Operation,
    OperationDeclarationError,
    Registry,
    ToolOutput,
    default_registry,
)


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    count: int = 1


def handler(args: Args, ctx: CallContext) -> ToolOutput:
    return ToolOutput(args.title * args.count)


def test_anthropic_catalog_is_sorted_canonical_and_stable() -> None:
    # covers: OPS-1, CCH-1
    first = default_registry().catalog("model")
    second = default_registry().catalog("model")
    tools = first.tools("anthropic")
    assert [t["name"] for t in tools] == sorted(t["name"] for t in tools)
    assert all(set(t) == {"name", "description", "input_schema"} for t in tools)
    assert first.json("anthropic") == second.json("anthropic")
    assert first.digest == second.digest
    text = first.json("anthropic")
    assert text == json.dumps(
        json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    for tool in tools:
        schema = tool["input_schema"]
        assert schema["additionalProperties"] is False
        assert "title" not in schema


def test_openai_projection_wraps_the_same_schemas() -> None:
    # covers: OPS-1
    catalog = default_registry().catalog("model")
    openai = catalog.tools("openai")
    anthropic = catalog.tools("anthropic")
    assert [o["type"] for o in openai] == ["function"] * len(openai)
    assert [o["function"]["parameters"] for o in openai] == [a["input_schema"] for a in anthropic]


def test_human_controls_absent_from_the_model_catalog_present_for_humans() -> None:
    # covers: OPS-6
    registry = default_registry()
    model = set(registry.catalog("model").names)
    tui = set(registry.catalog("tui").names)
    assert not model & HUMAN_CONTROLS
    assert {"model", "effort", "mode", "name"} <= tui
    # A command line process holds no live session to control: its flags set these.
    assert not set(registry.catalog("cli").names) & HUMAN_CONTROLS
    assert "/mode" in registry.slash_commands()
    assert "login" not in tui  # no host login flow was given
    with_login = default_registry(login=lambda provider: f"me@{provider}")
    assert "login" in with_login.catalog("tui").names
    assert "login" not in with_login.catalog("model").names


def test_property_named_title_survives_schema_cleaning() -> None:
    # covers: OPS-1
    op = Operation("Titled", "t", Args, handler)
    assert "title" in op.parameters["properties"]
    assert "title" not in op.parameters["properties"]["title"]


def test_digest_and_contract_change_with_the_schema_version() -> None:
    # covers: OPS-1, OPS-2, TOK-2
    v1 = Registry([Operation("Echo", "echo", Args, handler)]).catalog()
    v2 = Registry([Operation("Echo", "echo", Args, handler, version=2)]).catalog()
    assert v1.contract("Echo") != v2.contract("Echo")
    assert v1.digest != v2.digest
    assert v1.json() == v2.json()  # the wire bytes are the same; the contract is not


def test_declaration_errors_are_refused() -> None:
    # covers: OPS-1, OPS-6
    class Loose(BaseModel):
        x: int

    with pytest.raises(OperationDeclarationError, match="forbid extra"):
        Operation("Loose", "d", Loose, handler)
    with pytest.raises(OperationDeclarationError, match="human-audience"):
        Operation("ctl", "d", Args, handler, audience="human")
    with pytest.raises(OperationDeclarationError, match="name"):
        Operation("bad name", "d", Args, handler)
    registry = Registry([Operation("Echo", "e", Args, handler)])
    with pytest.raises(OperationDeclarationError, match="already registered"):
        registry.add(Operation("Echo", "e", Args, handler))
    with pytest.raises(OperationDeclarationError, match="slash command"):
        registry.add(Operation("echo", "e", Args, handler))


def test_public_api_is_pinned() -> None:
    # covers: OPS-1
    assert len(set(comal.ops.__all__)) == len(comal.ops.__all__)
    for name in comal.ops.__all__:
        assert hasattr(comal.ops, name), name
    assert {"House", "Registry", "Policy", "Decision", "Receipt", "reconcile", "may_retry"} <= set(
        comal.ops.__all__
    )
