"""Hooks in Claude Code's shape (DRV-6): the operator's commands, configured as Claude Code
writes them, run for real (bash scripts in the workspace, in the sandbox) while the real agent
works a scripted model; each run is recorded in the ledger.

# covers: DRV-6, PLG-1
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from _agent_support import Rig, reply, rig, text, tool
from comal.agent import Config, PromptBlocked, house_factory
from comal.agent._lifecycle import MAX_CONTINUES
from comal.errors import InputError
from comal.hooks import CommandHooks
from comal.hooks._plugin import forget_started
from comal.ops import Workspace, default_registry, receipts, unguarded
from comal.testing import ScriptedProvider

HOOKS = ".claude/hooks"


def hooked(
    tmp_path: Path,
    hooks: dict[str, Any] | None = None,
    *,
    hooks_from: tuple[str, ...] = (),
    scripts: dict[str, str] | None = None,
) -> Rig:
    """A rig whose house comes from the configuration, as every surface's does."""
    r = rig(tmp_path)
    for name, body in (scripts or {}).items():
        path = r.root / HOOKS / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    config = Config.model_validate(
        {"mode": "trusted", "hooks": hooks or {}, "hooks_from": list(hooks_from)}
    )
    factory = house_factory(
        r.ledger, config, default_registry(), workspace=Workspace(r.root),
        protect=tmp_path / "config.json", guard=unguarded,  # the test is the only writer
    )  # fmt: skip
    r.house = factory.house(r.scope)
    return r


def command(cmd: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": cmd, **extra}


def on(matcher: str | None, *handlers: dict[str, Any]) -> list[dict[str, Any]]:
    group: dict[str, Any] = {"hooks": list(handlers)}
    if matcher is not None:
        group["matcher"] = matcher
    return [group]


def script(name: str) -> str:
    return f'"$CLAUDE_PROJECT_DIR"/{HOOKS}/{name}'


def tool_result(provider: ScriptedProvider, turn: int, call_id: str) -> str:
    seen = provider.calls[turn].messages
    found = next(m.tool_result for m in seen if m.tool_result and m.tool_result.call_id == call_id)
    return found.text


def hook_events(r: Rig) -> list[dict[str, Any]]:
    return [rec.body for rec in r.ledger.records(r.scope, "event", kinds=("hook",))]


def runs_of(kept: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The command runs a judgment's or receipt's hooks record."""
    return [x["record"] for x in (kept or {}).get("results", []) if "record" in x]


BLOCK_RM = """#!/bin/bash
# Reads JSON input from stdin, checks the command (Claude Code's exit-2 example)
input=$(cat)
printf '%s' "$input" > "$CLAUDE_PROJECT_DIR/seen.json"
cp "$(jq -r '.transcript_path' <<<"$input")" "$CLAUDE_PROJECT_DIR/seen-transcript.jsonl"
command=$(jq -r '.tool_input.command' <<<"$input")

if [[ "$command" == rm* ]]; then
  echo "Blocked: rm commands are not allowed" >&2
  exit 2  # Blocking error: tool call is prevented
fi

exit 0  # No decision: the normal permission flow applies
"""


def test_exit_2_blocks_a_bash_call_and_the_model_reads_stderr(tmp_path: Path) -> None:
    # covers: DRV-6, OPS-2
    r = hooked(
        tmp_path,
        {"PreToolUse": on("Bash", command(script("block-rm.sh")))},
        scripts={"block-rm.sh": BLOCK_RM},
    )
    (r.root / "keep.txt").write_text("keep\n")
    provider = ScriptedProvider(
        [
            reply(tool("b1", "Bash", command="rm keep.txt"), tool("b2", "Bash", command="ls")),
            reply(text("I could not delete it.")),
        ]
    )
    result = r.agent(provider).run("Delete keep.txt")
    assert result.status == "finished" and (r.root / "keep.txt").exists()
    by_call = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    denied = by_call["b1"]
    assert denied.status == "denied" and denied.judgment["rule"] == "hook:comal-hooks"
    assert "Blocked: rm commands are not allowed" in denied.judgment["reason"]
    assert "Blocked: rm commands are not allowed" in tool_result(provider, 1, "b1")
    assert by_call["b2"].status == "ok"
    # The run is recorded with the call's receipt: the command, its exit code, its output.
    (run,) = runs_of(denied.judgment["hooks"])
    assert run["command"] == script("block-rm.sh") and run["exit_code"] == 2
    assert "Blocked" in run["stderr"] and run["sandboxed"] is True
    assert run["event"] == "PreToolUse" and isinstance(run["seconds"], float)
    # stdin is Claude Code's event (the second call's, the last the hook saw).
    seen = json.loads((r.root / "seen.json").read_text())
    assert {k: seen[k] for k in ("session_id", "hook_event_name", "cwd", "permission_mode")} == {
        "session_id": r.scope.session,
        "hook_event_name": "PreToolUse",
        "cwd": str(r.root),
        "permission_mode": "bypassPermissions",
    }
    assert (seen["tool_name"], seen["tool_input"], seen["tool_use_id"]) == (
        "Bash", {"command": "ls"}, "b2"
    )  # fmt: skip
    # The transcript the hook read inside the sandbox: Claude Code's JSON lines.
    lines = [json.loads(x) for x in (r.root / "seen-transcript.jsonl").read_text().splitlines()]
    assert lines[0]["type"] == "user" and "Delete keep.txt" in json.dumps(lines[0]["message"])
    assert any(
        block.get("type") == "tool_use" and block.get("id") == "b2"
        for line in lines if line["type"] == "assistant"
        for block in line["message"]["content"]
    )  # fmt: skip


def test_a_json_permission_decision_denies_and_its_reason_reaches_the_model(
    tmp_path: Path,
) -> None:
    # covers: DRV-6, OPS-2
    deny = (
        'jq -n \'{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: '
        '"deny", permissionDecisionReason: "Database writes are not allowed"}}\''
    )
    ask = """jq -n '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision:
        "ask", permissionDecisionReason: "a person looks at edits"}}'"""
    r = hooked(tmp_path, {"PreToolUse": [*on("Write", command(deny)), *on("Edit", command(ask))]})
    (r.root / "a.txt").write_text("a\n")
    provider = ScriptedProvider(
        [
            reply(
                tool("w1", "Write", path="app.db", content="rows\n"),
                tool("e1", "Edit", path="a.txt", old_string="a", new_string="b"),
            ),
            reply(text("Both refused.")),
        ]
    )
    r.agent(provider).run("Write the database")
    assert not (r.root / "app.db").exists() and (r.root / "a.txt").read_text() == "a\n"
    by_call = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert by_call["w1"].status == "denied"
    assert "Database writes are not allowed" in tool_result(provider, 1, "w1")
    # An ask with no one to ask (headless) is refused; the hook's reason is the question's.
    assert by_call["e1"].status == "denied"
    assert "a person looks at edits" in str(by_call["e1"].judgment)


def test_post_tool_use_feedback_and_failure_context_reach_the_model(tmp_path: Path) -> None:
    # covers: DRV-6
    block = (
        'jq -n \'{decision: "block", reason: "run the formatter on this file", '
        'hookSpecificOutput: {hookEventName: "PostToolUse", additionalContext: "style: black"}}\''
    )
    failed = (
        'jq -n --arg e "$(jq -r .error)" \'{hookSpecificOutput: {hookEventName: '
        '"PostToolUseFailure", additionalContext: ("the check failed: " + ($e|split("\\n")[0]))}}\''
    )
    r = hooked(
        tmp_path,
        {
            "PostToolUse": on("Edit|Write", command(block)) + on("Bash", command("touch ran.txt")),
            "PostToolUseFailure": on("Bash", command(failed), command("cat > failure.json")),
        },
    )
    provider = ScriptedProvider(
        [
            reply(tool("w1", "Write", path="x.py", content="x=1\n")),
            reply(tool("b1", "Bash", command="echo broken >&2; exit 3")),
            reply(text("done")),
        ]
    )
    r.agent(provider).run("Write x.py")
    assert (r.root / "x.py").read_text() == "x=1\n"
    seen = tool_result(provider, 1, "w1")
    assert "run the formatter on this file" in seen and "style: black" in seen
    (write, bash) = receipts(r.ledger, r.scope)
    assert write.status == "ok" and runs_of(write.observations["hooks"])[0]["exit_code"] == 0
    # A failed call is PostToolUseFailure: its hook runs, the PostToolUse one does not.
    assert bash.status == "error" and not (r.root / "ran.txt").exists()
    assert "the check failed: [stderr]" in tool_result(provider, 2, "b1")
    told = json.loads((r.root / "failure.json").read_text())
    assert told["hook_event_name"] == "PostToolUseFailure" and "tool_response" not in told
    assert "[exit code 3]" in told["error"] and told["is_interrupt"] is False


def test_a_stop_hook_makes_the_agent_go_on_told_why(tmp_path: Path) -> None:
    # covers: DRV-6
    stop = """#!/bin/bash
input=$(cat)
if [ "$(jq -r .stop_hook_active <<<"$input")" = "true" ]; then exit 0; fi
jq -n --arg last "$(jq -r .last_assistant_message <<<"$input")" \\
  '{decision: "block", reason: ("you said \\"" + $last + "\\" but ran no tests")}'
"""
    r = hooked(tmp_path, {"Stop": on(None, command(script("stop.sh")))}, scripts={"stop.sh": stop})
    provider = ScriptedProvider(
        [
            reply(text("All done.")),
            reply(tool("b1", "Bash", command="echo tests pass")),
            reply(text("Tests pass; done.")),
        ]
    )
    result = r.agent(provider).run("Fix it")
    provider.assert_complete()
    assert (result.status, result.answer) == ("finished", "Tests pass; done.")
    told = [e.message.text for e in r.ledger.entries(r.scope) if e.message.name == "hook"]
    assert len(told) == 1 and 'you said "All done." but ran no tests' in told[0]
    stops = [b for b in hook_events(r) if b["event"] == "Stop"]
    assert [s["results"][0]["record"]["exit_code"] for s in stops] == [0, 0]
    assert [s["results"][0]["decision"] for s in stops] == ["block", None]


def test_a_stop_hook_that_always_blocks_is_bounded(tmp_path: Path) -> None:
    # covers: DRV-6
    r = hooked(tmp_path, {"Stop": on(None, command("echo 'keep going' >&2; exit 2"))})
    provider = ScriptedProvider([reply(text(f"answer {i}")) for i in range(MAX_CONTINUES + 1)])
    result = r.agent(provider).run("Go")
    provider.assert_complete()
    assert result.status == "finished"
    told = [e for e in r.ledger.entries(r.scope) if e.message.name == "hook"]
    assert len(told) == MAX_CONTINUES and "keep going" in told[0].message.text


def test_user_prompt_submit_adds_context_or_blocks_the_prompt(tmp_path: Path) -> None:
    # covers: DRV-6
    gate = """#!/bin/bash
prompt=$(jq -r .prompt)
if [[ "$prompt" == *password* ]]; then
  echo "prompts must not carry secrets" >&2
  exit 2
fi
echo "The release branch is rel-7."
"""
    extra = (
        'jq -n \'{hookSpecificOutput: {hookEventName: "UserPromptSubmit", '
        'additionalContext: "CI is green on rel-7."}}\''
    )
    r = hooked(
        tmp_path,
        {"UserPromptSubmit": on(None, command(script("gate.sh")), command(extra))},
        scripts={"gate.sh": gate},
    )
    provider = ScriptedProvider([reply(text("rel-7"))])
    r.agent(provider).run("Which branch?")
    added = [m.text for m in provider.calls[0].messages if m.name == "hook"]
    assert any("The release branch is rel-7." in m and "CI is green on rel-7." in m for m in added)
    before = len(r.ledger.entries(r.scope))
    with pytest.raises(PromptBlocked, match="prompts must not carry secrets"):
        r.agent(ScriptedProvider([])).run("my password is hunter2")
    assert len(r.ledger.entries(r.scope)) == before  # nothing of it was stored
    prompts = [b for b in hook_events(r) if b["event"] == "UserPromptSubmit"]
    assert [len(p["results"]) for p in prompts] == [2, 2]  # every run recorded, blocked or not


def _alive(marker: str) -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def test_a_hanging_hook_is_killed_at_its_timeout_with_what_it_started(tmp_path: Path) -> None:
    # covers: DRV-6
    marker = "301.1729"
    r = hooked(
        tmp_path,
        {"PreToolUse": on("Bash", command(f"sleep {marker} & sleep {marker}", timeout=1))},
    )
    provider = ScriptedProvider([reply(tool("b1", "Bash", command="echo ran")), reply(text("ok"))])
    r.agent(provider).run("Run it")
    (receipt,) = receipts(r.ledger, r.scope)
    assert receipt.status == "ok"  # a hook that timed out decides nothing, as in Claude Code
    (run,) = runs_of(receipt.judgment["hooks"])
    assert run["timed_out"] is True and run["exit_code"] is None and run["timeout"] == 1
    assert "timed out" in run["reply"]["error"]
    deadline = time.monotonic() + 10  # the kernel reaps the namespace's processes
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(marker)


def test_matchers_exact_names_lists_regexes_and_all(tmp_path: Path) -> None:
    # covers: DRV-6
    r = hooked(
        tmp_path,
        {
            "PreToolUse": [
                *on("Write", command("true # exact")),
                *on("^Ed.*", command("true # regex")),
                *on("Bash, Grep", command("true # list")),
                *on("*", command("true # all")),
                *on("Edit|Write", command("true # all")),  # the same handler runs once
            ]
        },
    )
    (r.root / "a.txt").write_text("a\n")
    provider = ScriptedProvider(
        [
            reply(
                tool("w1", "Write", path="b.txt", content="b\n"),
                tool("e1", "Edit", path="a.txt", old_string="a", new_string="c"),
                tool("b1", "Bash", command="true"),
                tool("r1", "Read", path="a.txt"),
            ),
            reply(text("ok")),
        ]
    )
    r.agent(provider).run("Go")
    ran = {
        rc.call_id: sorted(x["command"].split("# ")[1] for x in runs_of(rc.judgment["hooks"]))
        for rc in receipts(r.ledger, r.scope)
    }
    assert ran == {
        "w1": ["all", "exact"],
        "e1": ["all", "regex"],
        "b1": ["all", "list"],
        "r1": ["all"],
    }


PROTECT_FILES = r"""#!/bin/bash
# protect-files.sh

INPUT=$(cat)
FILE_PATH=$(echo "$INPUT" | jq -r '.tool_input.file_path // empty')

# Normalize Windows backslash separators so the patterns below match
FILE_PATH="${FILE_PATH//\\//}"

PROTECTED_PATTERNS=(".env" "package-lock.json" ".git/")

for pattern in "${PROTECTED_PATTERNS[@]}"; do
  if [[ "$FILE_PATH" == *"$pattern"* ]]; then
    echo "Blocked: $FILE_PATH matches protected pattern '$pattern'" >&2
    exit 2
  fi
done

exit 0
"""
# Claude Code's hooks guide, "Block edits to protected files", as it is written there.
PROTECT_SETTINGS = """{
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Edit|Write",
        "hooks": [
          {
            "type": "command",
            "command": "\\"$CLAUDE_PROJECT_DIR\\"/.claude/hooks/protect-files.sh"
          }
        ]
      }
    ]
  }
}
"""


def test_a_claude_code_settings_file_works_unchanged(tmp_path: Path) -> None:
    # covers: DRV-6, CFG-2
    r = hooked(
        tmp_path,
        hooks_from=(".claude/settings.json",),
        scripts={"protect-files.sh": PROTECT_FILES, "../settings.json": PROTECT_SETTINGS},
    )
    provider = ScriptedProvider(
        [
            reply(
                tool("w1", "Write", path=".env", content="KEY=1\n"),
                tool("w2", "Write", path="notes.txt", content="hi\n"),
                tool("w3", "Write", path=".claude/settings.json", content="{}"),
            ),
            reply(text("done")),
        ]
    )
    r.agent(provider).run("Write them")
    assert not (r.root / ".env").exists() and (r.root / "notes.txt").read_text() == "hi\n"
    assert f"Blocked: {r.root}/.env matches protected pattern '.env'" in tool_result(
        provider, 1, "w1"
    )
    # The file the operator named is not the model's to write.
    assert json.loads((r.root / ".claude/settings.json").read_text())["hooks"]
    by_call = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert by_call["w3"].status == "denied" and by_call["w3"].judgment["rule"] != "hook:comal-hooks"


BLOCK_RM_JSON = """#!/bin/bash
# .claude/hooks/block-rm.sh
COMMAND=$(jq -r '.tool_input.command')

if echo "$COMMAND" | grep -q 'rm -rf'; then
  jq -n '{
    hookSpecificOutput: {
      hookEventName: "PreToolUse",
      permissionDecision: "deny",
      permissionDecisionReason: "Destructive command blocked by hook"
    }
  }'
else
  exit 0  # no decision; normal permission flow applies
fi
"""


def test_the_reference_example_with_if_and_exec_form(tmp_path: Path) -> None:
    # covers: DRV-6
    handler = {
        "type": "command",
        "if": "Bash(rm *)",
        "command": "${CLAUDE_PROJECT_DIR}/.claude/hooks/block-rm.sh",
        "args": [],
    }
    r = hooked(
        tmp_path, {"PreToolUse": on("Bash", handler)}, scripts={"block-rm.sh": BLOCK_RM_JSON}
    )
    (r.root / "build").mkdir()
    (r.root / "notes.txt").write_text("n\n")
    provider = ScriptedProvider(
        [
            reply(
                tool("b1", "Bash", command="rm -rf build"),
                tool("b2", "Bash", command="ls"),
                tool("b3", "Bash", command="rm notes.txt"),
            ),
            reply(text("done")),
        ]
    )
    r.agent(provider).run("Clean up")
    by_call = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert by_call["b1"].status == "denied" and (r.root / "build").is_dir()
    assert "Destructive command blocked by hook" in tool_result(provider, 1, "b1")
    assert by_call["b2"].judgment.get("hooks") is None  # the if rule did not fit: not run
    assert by_call["b3"].status == "ok" and not (r.root / "notes.txt").exists()
    (run,) = runs_of(by_call["b3"].judgment["hooks"])
    assert run["command"] == f"{r.root}/.claude/hooks/block-rm.sh" and run["exit_code"] == 0


def test_a_rewritten_input_is_refused_and_offered_to_the_model(tmp_path: Path) -> None:
    # covers: DRV-6, OPS-2
    rewrite = (
        'jq \'{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "allow",'
        ' updatedInput: (.tool_input + {command: (.tool_input.command + " --dry-run")})}}\''
    )
    r = hooked(tmp_path, {"PreToolUse": on("Bash", command(rewrite))})
    provider = ScriptedProvider(
        [reply(tool("b1", "Bash", command="touch made.txt")), reply(text("ok"))]
    )
    r.agent(provider).run("Make it")
    assert not (r.root / "made.txt").exists()  # neither the call nor its rewrite ran unjudged
    said = tool_result(provider, 1, "b1")
    assert 'propose it again as Bash {"command": "touch made.txt --dry-run"}' in said


def test_continue_false_ends_the_run(tmp_path: Path) -> None:
    # covers: DRV-6
    halt = "jq -n '{continue: false, stopReason: \"the build is red: stop here\"}'"
    r = hooked(tmp_path, {"PostToolUse": on("Bash", command(halt))})
    provider = ScriptedProvider(
        [reply(tool("b1", "Bash", command="echo hi")), reply(text("never asked"))]
    )
    result = r.agent(provider).run("Go")
    assert result.status == "stopped" and len(provider.calls) == 1
    assert result.error is not None and "the build is red: stop here" in result.error["message"]


def test_session_start_context_compaction_and_what_is_not_run(tmp_path: Path) -> None:
    # covers: DRV-6
    r = hooked(
        tmp_path,
        {
            "SessionStart": on("startup", command("echo 'Reminder: use Bun, not npm.'"))
            + on("resume", command("echo 'Welcome back.'")),
            "PreCompact": on("manual", command("jq -r .trigger > compact-trigger.txt")),
            "Notification": on("", command("notify-send hi")),
            "PostToolUse": on("Write", {"type": "http", "url": "http://127.0.0.1:9/hook"}),
        },
    )
    hooks = r.house.hooks
    assert isinstance(hooks, CommandHooks)
    assert len(hooks.skipped) == 2 and "notify-send" in " ".join(hooks.skipped)
    agent = r.agent(ScriptedProvider([reply(text(x)) for x in ("hello", "again", "back")]))
    agent.run("Hi")
    agent.run("Once more")  # a second prompt of the same process: the session did not restart
    forget_started()  # as a new process would find it: the session resumes
    agent.run("And again")
    said = [e.message.text for e in r.ledger.entries(r.scope) if e.message.name == "hook"]
    assert len(said) == 2
    assert said[0].endswith("Reminder: use Bun, not npm.") and said[1].endswith("Welcome back.")
    agent.proposer.service.compact(agent.proposer.budget())
    assert (r.root / "compact-trigger.txt").read_text() == "manual\n"
    (pre,) = [b for b in hook_events(r) if b["event"] == "PreCompact"]
    assert pre["results"][0]["record"]["exit_code"] == 0


def test_a_work_step_fires_subagent_stop_only(tmp_path: Path) -> None:
    # covers: DRV-6
    record = 'input=$(cat); printf %s "$input" > "seen-$(jq -r .hook_event_name <<<"$input").json"'
    r = hooked(
        tmp_path,
        {
            "SubagentStop": on(None, command(record)),
            "SessionStart": on(None, command(record)),
            "UserPromptSubmit": on(None, command(record)),
        },
    )
    parent = r.agent(ScriptedProvider([]))
    child = parent.spawn_child(provider=ScriptedProvider([reply(text("child done"))]))
    child.run("Count the files")
    seen = json.loads((r.root / "seen-SubagentStop.json").read_text())
    assert seen["agent_id"] == child.scope.session and seen["agent_type"] == child.scope.agent
    assert seen["last_assistant_message"] == "child done"
    assert not (r.root / "seen-SessionStart.json").exists()
    assert not (r.root / "seen-UserPromptSubmit.json").exists()


def test_hooks_run_in_the_sandbox_without_the_processes_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: DRV-6
    monkeypatch.setenv("ACME_API_KEY", "sk-should-not-leak")
    outside = tmp_path / "outside.txt"
    probe = f"env > env.txt; echo escaped > {outside}; true"
    r = hooked(tmp_path, {"UserPromptSubmit": on(None, command(probe))})
    r.agent(ScriptedProvider([reply(text("ok"))])).run("Hi")
    env = (r.root / "env.txt").read_text()
    assert f"CLAUDE_PROJECT_DIR={r.root}" in env and "sk-should-not-leak" not in env
    assert not outside.exists()  # outside the workspace nothing is written


def test_the_configuration_is_checked_when_read(tmp_path: Path) -> None:
    # covers: DRV-6, CFG-1, CFG-2
    from comal.agent import explain_config, load_config

    def load(data: dict[str, Any]) -> Config:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(data))
        return load_config(path, env={})

    with pytest.raises(InputError) as typo:
        load({"hooks": {"PreToolUse ": on("Bash", command("true"))}})
    assert typo.value.field and typo.value.field.startswith("hooks")
    with pytest.raises(InputError) as regex:
        load({"hooks": {"PreToolUse": on("(a", command("true"))}})
    assert "matcher" in (regex.value.field or "")
    with pytest.raises(InputError) as missing:
        load({"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}})
    assert "needs its command" in str(missing.value)
    # A settings file named absolute must exist; the workspace's own may be absent.
    config = load({"hooks_from": [str(tmp_path / "nope.json")]})
    with pytest.raises(InputError) as absent:
        house_factory(rig(tmp_path).ledger, config, default_registry(),
                      workspace=Workspace(tmp_path), protect=tmp_path / "c.json")  # fmt: skip
    assert absent.value.code == "HOOKS_FILE"
    # A settings file of a newer Claude Code: what this comal does not know is listed.
    newer = tmp_path / "settings.json"
    section = {
        "Stop": on(None, command("true", color="red")),
        "BrandNewEvent": on(None, command("true")),
    }
    newer.write_text(json.dumps({"hooks": section}))
    config = load({"hooks_from": [str(newer)]})
    factory = house_factory(
        rig(tmp_path / "b").ledger, config, default_registry(), protect=tmp_path / "c.json"
    )
    hooks = factory.hooks
    assert isinstance(hooks, CommandHooks) and len(hooks.handlers) == 1
    assert any("BrandNewEvent" in s for s in hooks.skipped)
    assert any("'color'" in s for s in hooks.skipped)
    # comal config show says what the file sets, operator-only.
    _, shown = explain_config(tmp_path / "config.json", env={})
    (row,) = [s for s in shown if s.key == "hooks_from"]
    assert row.value == [str(newer)] and row.source == "file" and row.operator_only


def test_comal_p_runs_the_configured_hooks(tmp_path: Path) -> None:
    # covers: DRV-6, CFG-2
    ws = tmp_path / "ws"
    (ws / HOOKS).mkdir(parents=True)
    guard = ws / HOOKS / "block-rm.sh"
    guard.write_text(BLOCK_RM)
    guard.chmod(0o755)
    (ws / "keep.txt").write_text("keep\n")
    config = tmp_path / "config.yaml"
    config.write_text(
        "mode: trusted\n"
        "hooks:\n"
        "  PreToolUse:\n"
        "    - matcher: Bash\n"
        "      hooks:\n"
        "        - type: command\n"
        f"          command: '\"$CLAUDE_PROJECT_DIR\"/{HOOKS}/block-rm.sh'\n"
        "          timeout: 30\n"
    )
    model = tmp_path / "model.jsonl"
    model.write_text(
        json.dumps(reply(tool("b1", "Bash", command="rm keep.txt"))) + "\n"
        + json.dumps(reply(text("The hook refused it."))) + "\n"
    )  # fmt: skip
    env = os.environ | {"COMAL_CONFIG": str(config), "COMAL_LEDGER": str(tmp_path / "l.db")}
    run = subprocess.run(
        [sys.executable, "-m", "comal", "-p", "Delete keep.txt", "--model", f"script:{model}",
         "--workspace", str(ws), "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    # A headless run whose call a hook denied does not report success (DRV-4).
    assert run.returncode == 6, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["status"] == "denied" and result["error"]["code"] == "CALLS_DENIED"
    assert (ws / "keep.txt").exists() and result["answer"] == "The hook refused it."
    (receipt,) = result["receipts"]
    assert receipt["status"] == "denied" and receipt["judgment"]["rule"] == "hook:comal-hooks"
    assert "Blocked: rm commands are not allowed" in receipt["judgment"]["reason"]
    (record,) = runs_of(receipt["judgment"]["hooks"])
    assert record["exit_code"] == 2 and record["sandboxed"] is True
