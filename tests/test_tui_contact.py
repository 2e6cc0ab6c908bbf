"""The TUI a newcomer met (issue 19), driven through textual's pilot: what the model said and did
shown once, the preamble as metadata, approvals that show the change, and the commands people
expect (/cost, /clear, /resume, /exit, a model picker, /name that renames).

The approval screenshot goes to ``$COMAL_SCREENSHOTS`` when set (``make screenshots``)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Collapsible, OptionList, Static
from typer.testing import CliRunner

from _tui_support import until as _until
from comal.agent import Config, Flags, Runtime
from comal.cli import app as cli_app
from comal.ledger import open_ledger
from comal.ops import receipts
from comal.testing import ScriptedProvider
from comal.tui import ApprovalScreen, ComalApp


def _tool(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def _shown(app: ComalApp) -> list[str]:
    """The transcript, widget by widget (a collapsed output by its title)."""
    out = []
    for widget in app.query("#transcript > *"):
        if isinstance(widget, Collapsible):
            out.append(f"[output] {widget.title}")
        else:
            out.append(str(widget.render()))
    return out


def _runtime(tmp_path: Path, script: list[dict[str, Any]], mode: str = "trusted") -> Runtime:
    led = open_ledger(tmp_path / "tui.db")
    flags = Flags(model="anthropic:claude-sonnet-4-6", context_window=32_000, workspace=tmp_path)
    rt = Runtime.open(led, flags, config=Config(mode=mode), provider=ScriptedProvider(script))
    rt.user = "ana"
    return rt


async def _prompt(pilot: Any, app: ComalApp, text: str) -> None:
    await pilot.click("Input")
    await pilot.press(*text, "enter")
    await pilot.pause(0.1)
    await _until(pilot, lambda: not app.busy)


def test_what_the_model_said_and_did_is_shown_once(tmp_path: Path) -> None:
    # covers: OPS-3
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    script = [
        {"content": [_text("I will read the notes first."), _tool("r1", "Read", path="notes.txt")]},
        {"content": [_text("The notes hold two lines.")]},
    ]
    rt = _runtime(tmp_path, script)
    app = ComalApp(rt)
    seen: list[str] = []

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await _prompt(pilot, app, "read the notes")
            seen.extend(_shown(app))

    asyncio.run(drive())
    rt.ledger.close()
    joined = "\n".join(seen)
    assert joined.count("I will read the notes first.") == 1, seen
    assert joined.count("→ Read(notes.txt)") == 1
    assert joined.count("The notes hold two lines.") == 1
    assert any(s.startswith("[output] Read output") for s in seen)
    said = [s for s in seen if s.startswith(("you:", "comal:", "→"))]
    assert said == [
        "you: read the notes",
        "comal: I will read the notes first.",
        "→ Read(notes.txt)",
        "comal: The notes hold two lines.",
    ]


def test_continuing_shows_each_call_once_and_the_preamble_as_metadata(tmp_path: Path) -> None:
    # covers: RES-1, CCH-1
    script = [
        {"content": [_text("Looking."), _tool("g1", "Glob", pattern="*.txt")]},
        {"content": [_text("Nothing there.")]},
    ]
    rt = _runtime(tmp_path, script)
    rt.run("find the text files")
    # As `comal -c` opens it.
    again = Runtime.open(
        rt.ledger, rt.flags, latest=True, config=rt.config, provider=ScriptedProvider([])
    )
    app = ComalApp(again)
    seen: list[str] = []

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.2)
            seen.extend(_shown(app))

    asyncio.run(drive())
    rt.ledger.close()
    joined = "\n".join(seen)
    assert "<context>" not in joined and "</context>" not in joined, seen
    assert "you: find the text files" in seen  # the person's words, alone
    (context,) = [s for s in seen if "sender: ana" in s]  # the preamble, as metadata
    assert context.startswith("· ") and "date: " in context
    assert joined.count('→ Glob {"pattern":"*.txt"}') == 1, seen
    assert joined.count("Looking.") == 1 and joined.count("Nothing there.") == 1


def test_approvals_show_the_diff_of_an_edit_and_the_command_of_bash(tmp_path: Path) -> None:
    # covers: OPS-2, OPS-3
    (tmp_path / "app.py").write_text('def greet():\n    return "hello"\n\n\nprint(greet())\n')
    edit = _tool(
        "e1", "Edit", path="app.py", old_string='return "hello"', new_string='return "hello, world"'
    )
    script = [
        {"content": [_text("I will change the greeting."), edit]},
        {"content": [_tool("b1", "Bash", command="python3 app.py && rm -rf build")]},
        {"content": [_text("Done.")]},
    ]
    rt = _runtime(tmp_path, script, mode="ask")
    app = ComalApp(rt)
    dialogs: list[str] = []
    shots = os.environ.get("COMAL_SCREENSHOTS")

    def dialog_text() -> str:
        return "\n".join(str(w.render()) for w in app.screen.query(Static))

    async def drive() -> None:
        async with app.run_test(size=(110, 34)) as pilot:
            await pilot.click("Input")
            await pilot.press(*"greet the world", "enter")
            await _until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            await pilot.pause(0.2)
            dialogs.append(dialog_text())
            if shots:
                app.save_screenshot("tui-approval.svg", path=shots)
            await pilot.press("y")
            await _until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            await pilot.pause(0.1)
            dialogs.append(dialog_text())
            await pilot.press("n")
            await _until(pilot, lambda: not app.busy)

    asyncio.run(drive())
    edit_dialog, bash_dialog = dialogs
    assert "Approve Edit app.py?" in edit_dialog
    assert '-    return "hello"' in edit_dialog and '+    return "hello, world"' in edit_dialog
    assert "--- a/app.py" in edit_dialog and '"old_string"' not in edit_dialog  # no raw JSON
    assert "$ python3 app.py && rm -rf build" in bash_dialog and '{"command"' not in bash_dialog
    assert 'return "hello, world"' in (tmp_path / "app.py").read_text()
    statuses = {r.operation: r.status for r in receipts(rt.ledger, rt.need_scope())}
    assert statuses == {"Edit": "ok", "Bash": "denied"}
    rt.ledger.close()


def test_the_approval_diff_is_escaped(tmp_path: Path) -> None:
    # covers: OPS-2
    script = [
        {"content": [_tool("w1", "Write", path="x.txt", content="clear \x1b[2J \u202eevil\n")]},
        {"content": [_text("Done.")]},
    ]
    rt = _runtime(tmp_path, script, mode="ask")
    app = ComalApp(rt)
    seen: list[str] = []

    async def drive() -> None:
        async with app.run_test(size=(110, 34)) as pilot:
            await pilot.click("Input")
            await pilot.press(*"write it", "enter")
            await _until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            seen.extend(str(w.render()) for w in app.screen.query(Static))
            await pilot.press("n")
            await _until(pilot, lambda: not app.busy)

    asyncio.run(drive())
    rt.ledger.close()
    shown = "\n".join(seen)
    assert "+++ b/x.txt" in shown and "/dev/null" in shown  # a new file
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "\\x1b[2J" in shown and "\\u202e" in shown


def test_cost_name_model_picker_clear_resume_and_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: OPS-1, OPS-6, CCH-2, RES-1
    usage = {"input_tokens": 1000, "output_tokens": 20, "cache_read_input_tokens": 4000}
    script = [
        {"content": [_text("First answer.")], "usage": usage},
        {"content": [_text("Second answer.")], "usage": usage},
    ]
    rt = _runtime(tmp_path, script)
    app = ComalApp(rt)
    seen: dict[str, Any] = {}

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await _prompt(pilot, app, "first question")
            first = rt.need_scope().session
            await _prompt(pilot, app, "/cost")
            seen["cost"] = _shown(app)[-1]
            await _prompt(pilot, app, "/name parser fix")
            seen["name"] = _shown(app)[-1]
            await _prompt(pilot, app, "/model")
            assert type(app.screen).__name__ == "PickerScreen"
            picker = app.screen.query_one(OptionList)
            choices = [str(picker.get_option_at_index(i).id) for i in range(picker.option_count)]
            seen["choices"] = choices
            picker.highlighted = choices.index("anthropic:claude-haiku-4-5")
            await pilot.press("enter")
            await pilot.pause(0.2)
            seen["model"] = app.runtime.spec
            await _prompt(pilot, app, "/clear")
            assert app.runtime.scope is None and app.runtime is not rt
            seen["cleared"] = _shown(app)
            await _prompt(pilot, app, "second question")
            second = app.runtime.need_scope().session
            assert second != first
            seen["second_model"] = app.runtime.ledger.session(app.runtime.need_scope()).meta
            await _prompt(pilot, app, "/resume")
            assert type(app.screen).__name__ == "PickerScreen"
            picker = app.screen.query_one(OptionList)
            ids = [str(picker.get_option_at_index(i).id) for i in range(picker.option_count)]
            assert ids == [second, first]  # newest first
            picker.highlighted = 1
            await pilot.press("enter")
            await pilot.pause(0.2)
            assert app.runtime.need_scope().session == first
            seen["resumed"] = _shown(app)
            await _prompt(pilot, app, "/exit")
            seen["running"] = app.is_running

    asyncio.run(drive())
    assert "claude-sonnet-4-6: 1 request(s)" in seen["cost"]
    assert "1,000 new input, 4,000 cache read" in seen["cost"] and "$" in seen["cost"]
    assert "renamed 'first question' to 'parser fix'" in seen["name"]
    assert "anthropic:claude-sonnet-4-6" in seen["choices"]
    assert all(c.split(":")[0] in ("anthropic", "openai") for c in seen["choices"])
    assert seen["model"] == "anthropic:claude-haiku-4-5"
    assert seen["cleared"] == ["· new session: the first prompt starts it"]
    assert seen["second_model"]["model"] == "anthropic:claude-haiku-4-5"  # kept across /clear
    assert any("parser fix" in s for s in seen["resumed"])
    assert "you: first question" in seen["resumed"] and "comal: First answer." in seen["resumed"]
    assert seen["running"] is False
    db = str(tmp_path / "tui.db")
    listed = CliRunner().invoke(cli_app, ["--ledger", db, "sessions", "--json"])
    titles = {s["session"]: s["title"] for s in json.loads(listed.stdout)}
    assert titles[first_of(titles, "parser fix")] == "parser fix"  # comal sessions shows it
    by_name = [r for r in receipts(rt.ledger, rt.ledger.resolve(first_of(titles, "parser fix")))]
    ops = [(r.operation, r.surface) for r in by_name]
    assert ("cost", "tui") in ops and ("name", "tui") in ops and ("model", "tui") in ops
    rt.ledger.close()


def first_of(titles: dict[str, str | None], title: str) -> str:
    return next(sid for sid, t in titles.items() if t == title)


def test_comal_with_a_model_opens_the_tui_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: CFG-1
    from comal.cli import main

    opened: list[str | None] = []
    monkeypatch.setattr(ComalApp, "run", lambda self, **kw: opened.append(self.runtime.spec))
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"content": "hi"}) + "\n")
    for args in (["--model", f"script:{script}"], [f"--model=script:{script}", "--mode", "ask"]):
        with pytest.raises(SystemExit) as done:
            main(["--ledger", str(tmp_path / "l.db"), *args])
        assert done.value.code == 0, capsys.readouterr()
    assert opened == [f"script:{script}"] * 2
    with pytest.raises(SystemExit) as done:
        main(["--model", "nonesuch:x"])
    said = capsys.readouterr()
    assert done.value.code == 2 and "No such option" not in said.err + said.out
