"""Lifecycle hooks through pluggy: a plugin sees and steers a session's tool calls, prompts,
stops and compactions, and never widens what the house decided.

# covers: PLG-1, OPS-2
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from _agent_support import reply, rig, text, tool
from comal.agent import PromptBlocked
from comal.ops import Policy, receipts
from comal.plugins import enable_plugins, reset_plugins
from comal.testing import ScriptedProvider

HEAD = "from comal.plugins import HookResult, hookimpl\n"


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """``plugin(source)`` writes a module of hooks and enables it, as ``plugins:`` would; the
    process's plugins are forgotten after."""
    folder = tmp_path / "mods"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    reset_plugins()
    made: list[str] = []

    def enable(source: str) -> str:
        name = f"hooks_{len(made)}_{abs(hash(str(tmp_path))) % 10**6}"
        (folder / f"{name}.py").write_text(HEAD + textwrap.dedent(source))
        enable_plugins([name], where="the test")
        made.append(name)
        return name

    yield enable
    reset_plugins()
    for name in made:
        sys.modules.pop(name, None)


def _hook_events(r: object) -> list[dict[str, object]]:
    return [rec.body for rec in r.ledger.records(r.scope, "event", kinds=("hook",))]  # type: ignore[attr-defined]


def test_a_pre_tool_use_hook_denies_a_call_the_house_allowed(tmp_path: Path, plugin) -> None:
    # covers: PLG-1, OPS-2
    name = plugin(
        """
        @hookimpl
        def comal_pre_tool_use(event):
            command = event.data["tool_input"].get("command", "")
            if event.data["tool_name"] == "Bash" and "rm " in command:
                return HookResult.deny("no deleting in this repo")
            return None
        """
    )
    r = rig(tmp_path)  # trusted: the house alone would run it
    (r.root / "keep.txt").write_text("keep\n")
    provider = ScriptedProvider(
        [
            reply(tool("b1", "Bash", command="rm keep.txt"), tool("b2", "Bash", command="ls")),
            reply(text("I could not delete it.")),
        ]
    )
    result = r.agent(provider).run("Delete keep.txt")
    assert (r.root / "keep.txt").exists()
    by_call = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert by_call["b1"].status == "denied"
    assert by_call["b1"].judgment["rule"] == f"hook:{name}"
    assert "no deleting in this repo" in by_call["b1"].judgment["reason"]
    assert by_call["b2"].status == "ok"  # the other call was not the hook's business
    seen = provider.calls[1].messages
    denied = next(m for m in seen if m.tool_result is not None and m.tool_result.call_id == "b1")
    assert "no deleting in this repo" in denied.tool_result.text  # type: ignore[union-attr]
    assert result.status == "finished"


def test_a_hook_never_widens_what_the_house_denies(tmp_path: Path, plugin) -> None:
    # covers: OPS-2
    plugin(
        """
        CALLED = []

        @hookimpl
        def comal_pre_tool_use(event):
            CALLED.append(event.data["tool_name"])
            return None
        """
    )
    r = rig(tmp_path, policy=Policy(mode="read-only"))
    provider = ScriptedProvider(
        [reply(tool("w1", "Write", path="x.txt", content="x\n")), reply(text("ok"))]
    )
    r.agent(provider).run("Write x")
    (receipt,) = receipts(r.ledger, r.scope)
    assert receipt.status == "denied" and receipt.judgment["rule"].startswith("mode")
    assert not (r.root / "x.txt").exists()
    module = sys.modules[next(m for m in sys.modules if m.startswith("hooks_0_"))]
    assert module.CALLED == []  # a denied call is never put to a hook


def test_an_ask_from_a_hook_turns_an_allowed_call_into_an_approval(tmp_path: Path, plugin) -> None:
    # covers: OPS-2
    name = plugin(
        """
        @hookimpl
        def comal_pre_tool_use(event):
            if event.data["tool_name"] == "Write":
                return HookResult.ask("writes need a person here")
            return None
        """
    )
    r = rig(tmp_path)  # trusted, and no one to ask: an ask is refused
    provider = ScriptedProvider(
        [reply(tool("w1", "Write", path="x.txt", content="x\n")), reply(text("ok"))]
    )
    r.agent(provider).run("Write x")
    (receipt,) = receipts(r.ledger, r.scope)
    assert receipt.status == "denied"
    assert not (r.root / "x.txt").exists()
    assert name in str(receipt.judgment)


def test_a_post_tool_use_hook_speaks_to_the_model(tmp_path: Path, plugin) -> None:
    # covers: PLG-1
    plugin(
        """
        @hookimpl
        def comal_post_tool_use(event):
            if event.data["tool_response"]["is_error"]:
                return None
            return HookResult.block("run the linter after every write")
        """
    )
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [reply(tool("w1", "Write", path="x.txt", content="x\n")), reply(text("done"))]
    )
    r.agent(provider).run("Write x")
    seen = provider.calls[1].messages
    result = next(m.tool_result for m in seen if m.tool_result is not None)
    assert "run the linter after every write" in result.text
    (receipt,) = receipts(r.ledger, r.scope)
    assert receipt.status == "ok"
    assert receipt.observations["hooks"]["results"][0]["decision"] == "block"
    assert (r.root / "x.txt").read_text() == "x\n"


def test_a_stop_hook_makes_the_agent_go_on_once(tmp_path: Path, plugin) -> None:
    # covers: PLG-1
    plugin(
        """
        @hookimpl
        def comal_stop(event):
            if event.data["stop_hook_active"]:
                return None
            return HookResult.block("you did not run the tests")
        """
    )
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [
            reply(text("All done.")),
            reply(tool("b1", "Bash", command="echo tests pass")),
            reply(text("Tests pass; done.")),
        ]
    )
    result = r.agent(provider).run("Fix it")
    provider.assert_complete()
    assert result.status == "finished" and result.answer == "Tests pass; done."
    told = [e.message for e in r.ledger.entries(r.scope) if e.message.name == "hook"]
    assert len(told) == 1 and "you did not run the tests" in told[0].text
    # Recorded: the dispatch a hook answered (the second Stop had nothing to say).
    assert [b["event"] for b in _hook_events(r)] == ["Stop"]


def test_a_stop_hook_that_always_blocks_is_bounded(tmp_path: Path, plugin) -> None:
    # covers: PLG-1
    from comal.agent._lifecycle import MAX_CONTINUES

    plugin(
        """
        @hookimpl
        def comal_stop(event):
            return HookResult.block("again")
        """
    )
    r = rig(tmp_path)
    provider = ScriptedProvider([reply(text(f"answer {i}")) for i in range(MAX_CONTINUES + 1)])
    result = r.agent(provider).run("Go")
    provider.assert_complete()
    assert result.status == "finished"
    told = [e for e in r.ledger.entries(r.scope) if e.message.name == "hook"]
    assert len(told) == MAX_CONTINUES


def test_a_prompt_hook_adds_context_or_blocks(tmp_path: Path, plugin) -> None:
    # covers: PLG-1
    plugin(
        """
        @hookimpl
        def comal_user_prompt_submit(event):
            if "password" in event.data["prompt"]:
                return HookResult.block("prompts must not carry secrets")
            return HookResult.add_context("The release branch is rel-7.")
        """
    )
    r = rig(tmp_path)
    provider = ScriptedProvider([reply(text("ok"))])
    r.agent(provider).run("Which branch?")
    sent = provider.calls[0].messages
    assert any(m.name == "hook" and "rel-7" in m.text for m in sent)
    before = len(r.ledger.entries(r.scope))
    with pytest.raises(PromptBlocked, match="must not carry secrets"):
        r.agent(ScriptedProvider([])).run("my password is hunter2")
    assert len(r.ledger.entries(r.scope)) == before  # nothing of it was stored


def test_session_start_and_compaction_hooks_are_told(tmp_path: Path, plugin) -> None:
    # covers: PLG-1
    plugin(
        """
        @hookimpl
        def comal_session_start(event):
            return HookResult.add_context(f"started from {event.data['source']}")

        @hookimpl
        def comal_pre_compact(event):
            return HookResult.add_context(f"compacting ({event.data['trigger']})")

        @hookimpl
        def comal_post_compact(event):
            return HookResult.add_context(f"made {len(event.data['made'])}")
        """
    )
    r = rig(tmp_path)
    agent = r.agent(ScriptedProvider([reply(text("hello")), reply(text("again"))]))
    agent.run("Hi")
    agent.run("Once more")
    starts = [e.message.text for e in r.ledger.entries(r.scope) if e.message.name == "hook"]
    assert starts[0].endswith("started from startup") and starts[1].endswith("started from resume")
    agent.proposer.service.compact(agent.proposer.budget())
    events = [b["event"] for b in _hook_events(r)]
    assert events[-2:] == ["PreCompact", "PostCompact"]


def test_a_hook_that_raises_is_recorded_and_the_run_goes_on(tmp_path: Path, plugin) -> None:
    # covers: PLG-1
    name = plugin(
        """
        @hookimpl
        def comal_pre_tool_use(event):
            raise RuntimeError("hook bug")
        """
    )
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [reply(tool("w1", "Write", path="x.txt", content="x\n")), reply(text("done"))]
    )
    result = r.agent(provider).run("Write x")
    assert result.status == "finished" and (r.root / "x.txt").exists()
    (receipt,) = receipts(r.ledger, r.scope)
    assert receipt.status == "ok"
    (failure,) = receipt.judgment["hooks"]["failures"]
    assert failure == {"by": name, "error": "RuntimeError: hook bug"}
