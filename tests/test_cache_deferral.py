"""CCH-3: verbose (MCP) tools hide behind ToolSearch when the tool definitions exceed 10 % of
the window; discovered and used tools become visible and stay so; the list is byte-stable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _cache_support import MODEL, events
from comal.agent import (
    CACHE_BREAK_EVENT,
    CACHE_EDIT_EVENT,
    CATALOG_EVENT,
    TOOL_SEARCH,
    Config,
    Flags,
    Runtime,
)
from comal.agent._catalog import search_tools
from comal.ledger import open_ledger
from comal.messages import Message, ToolCall, canonical_json
from comal.ops import LARGE_CAP, Effect, Operation, ToolOutput
from comal.ops._mcp import model_from_schema
from comal.providers import ModelRequest
from comal.testing import FunctionProvider

# covers: CCH-3

VERBS = ("search", "fetch", "index", "summarize")


def _verbose_schema(verb: str) -> dict[str, Any]:
    props = {
        f"{verb}_option_{i}": {
            "type": "string",
            "description": f"Option {i} of the {verb} call: how the documents are {verb}ed "
            "when the collection is large, with the defaults the server documents.",
        }
        for i in range(12)
    }
    props |= {k: {"type": "string"} for k in ("query", "id", "q")}
    return {"type": "object", "properties": props}


def mcp_operations() -> list[Operation]:
    """Operations shaped as :meth:`McpServer.operations` makes them: ``mcp__server__tool``,
    the server's own schema, effects unknown; four verbose ones and a small one."""

    def handler(verb: str) -> Any:
        return lambda args, ctx: ToolOutput(f"{verb}: ok")

    ops = [
        Operation(
            f"mcp__docs__{verb}",
            f"The docs server's {verb} tool: {verb} documents of the collection.",
            model_from_schema(f"mcp__docs__{verb}", _verbose_schema(verb)),
            handler(verb),
            effects=(Effect("unknown"),),
            inline_cap=LARGE_CAP,
            schema=_verbose_schema(verb),
        )
        for verb in VERBS
    ]
    ops.append(
        Operation(
            "mcp__docs__ping",
            "Ping the docs server.",
            model_from_schema("mcp__docs__ping", {"type": "object"}),
            handler("ping"),
            effects=(Effect("unknown"),),
            schema={"type": "object"},
        )
    )
    return ops


def _call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}]}


def _runtime(led: Any, ws: Path, provider: Any, **kw: Any) -> Runtime:
    flags = Flags(model=f"anthropic:{MODEL}", workspace=ws, mode="trusted", **kw)
    rt = Runtime.open(led, flags, config=Config(), provider=provider)
    rt.registry.add_all(mcp_operations())
    return rt


def _names(request: ModelRequest) -> list[str]:
    return [t["name"] for t in request.tools]


def test_verbose_mcp_tools_hide_until_discovered_or_used(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = [
        _call("s1", TOOL_SEARCH, query="search"),
        _call("m1", "mcp__docs__search", query="cache"),
        _call("m2", "mcp__docs__fetch", id="7"),  # deferred, called by name: judged, then shown
        {"content": [{"type": "text", "text": "done"}]},
        {"content": [{"type": "text", "text": "again"}]},
    ]
    provider = FunctionProvider(lambda request: script[len(provider.calls) - 1])
    led = open_ledger(tmp_path / "l.db")
    rt = _runtime(led, ws, provider, context_window=12_000)
    assert rt.run("look it up").status == "finished"
    assert rt.scope is not None
    first, second, third, fourth = provider.calls
    deferred = {f"mcp__docs__{v}" for v in VERBS}
    shown = set(_names(first))
    assert TOOL_SEARCH in shown and "mcp__docs__ping" in shown  # small: never deferred
    assert {"Bash", "Read", "EvidenceRead"} <= shown  # natives stay while MCP tools suffice
    hidden = deferred - shown
    assert "mcp__docs__search" in hidden and "mcp__docs__fetch" in hidden
    listing = next(t for t in first.tools if t["name"] == TOOL_SEARCH)["description"]
    assert all(f"- {name}:" in listing for name in sorted(hidden))
    # Hidden, they cost a line each in ToolSearch's description instead of their schema.
    planned = events(led, rt.scope, CATALOG_EVENT)[0]
    assert planned["tools_tokens"] < planned["catalog_tokens"] - 1_500
    assert planned["catalog_tokens"] > 0.10 * 12_000  # why it deferred
    assert len(canonical_json(list(first.tools))) < len(canonical_json(list(fourth.tools)))
    assert "mcp__docs__search" in _names(second)  # discovered through ToolSearch
    assert _names(third) == _names(second)
    assert canonical_json(list(third.tools)) == canonical_json(list(second.tools))  # stable
    assert "mcp__docs__fetch" in _names(fourth)  # used: visible from then on
    # The order is the catalog's (by name), ToolSearch last.
    names = _names(fourth)
    assert names[:-1] == sorted(names[:-1]) and names[-1] == TOOL_SEARCH
    receipts = [r.body for r in led.records(rt.scope, "receipt")]
    search = next(r for r in receipts if r["operation"] == TOOL_SEARCH)
    assert search["status"] == "ok"
    changes = events(led, rt.scope, CATALOG_EVENT)
    assert [c["reason"].split(":")[0] for c in changes] == [
        "tools deferred",
        "tools discovered mcp__docs__search",
        "tools used mcp__docs__fetch",
    ]
    edits = [e for e in events(led, rt.scope, CACHE_EDIT_EVENT) if e["part"] == "tools"]
    assert [e["reason"] for e in edits] == [c["reason"] for c in changes[1:]]
    assert events(led, rt.scope, CACHE_BREAK_EVENT) == []
    # A new process resumes with what was decided: the same tools, no break.
    again = _runtime(led, ws, provider, context_window=12_000)
    again.scope = rt.scope
    assert again.run("once more").status == "finished"
    assert canonical_json(list(provider.calls[-1].tools)) == canonical_json(list(fourth.tools))
    assert events(led, rt.scope, CACHE_BREAK_EVENT) == []
    led.close()


def test_recently_used_tools_stay_visible_and_big_windows_defer_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    led = open_ledger(tmp_path / "l.db")
    scope = led.create_session("local", "comal", meta={"workspace": str(ws)})
    call = ToolCall("old", "mcp__docs__index", json.dumps({"q": "x"}))
    led.append(scope, [Message.user("index the docs")])
    led.append(scope, [Message.assistant("", call), Message.tool("old", "indexed")])
    led.append(scope, [Message.assistant("indexed")])
    provider = FunctionProvider(lambda request: {"content": [{"type": "text", "text": "ok"}]})
    small = _runtime(led, ws, provider, context_window=12_000)
    small.scope = scope
    assert small.run("what now").status == "finished"
    sent = _names(provider.calls[-1])
    assert "mcp__docs__index" in sent and TOOL_SEARCH in sent
    assert not {"mcp__docs__search", "mcp__docs__fetch"} <= set(sent)
    wide = _runtime(led, ws, provider)  # claude-sonnet-4-6: a 1M window, 10 % is plenty
    wide.scope = led.create_session("local", "comal", meta={"workspace": str(ws)})
    led.append(wide.scope, [Message.user("hi")])
    assert wide.run(None).status == "finished"
    everything = _names(provider.calls[-1])
    assert TOOL_SEARCH not in everything and {f"mcp__docs__{v}" for v in VERBS} <= set(everything)
    led.close()


def test_tool_search_matches_names_words_and_exact_selection() -> None:
    ops = mcp_operations()
    assert [o.name for o in search_tools(ops, "fetch", 5)] == ["mcp__docs__fetch"]
    assert [o.name for o in search_tools(ops, "select:mcp__docs__ping,nope", 5)] == [
        "mcp__docs__ping"
    ]
    found = [o.name for o in search_tools(ops, "documents", 2)]
    assert len(found) == 2 and found == sorted(found)  # ties broken by name, deterministic
    assert search_tools(ops, "nothing-like-it", 5) == []
