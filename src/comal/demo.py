"""``make demo``: build a real session from real tool calls, then show what comal knows of it.

Runs with nothing but the clone: no network, no API key, no ../shared. The "model" here is a
fixed script of tool calls; every tool really runs (files are read, grep and git really execute,
one command really fails) and every output is stored byte for byte in a fresh temporary ledger.

It works wherever the clone is and whether or not this machine has the OS sandbox: without
bubblewrap it says so once, shows the sandboxed command line each Bash call would have run, and
lets only its own scripted commands, in its own temporary workspace, run unsandboxed (its
configuration sets ``sandbox.allow_unsandboxed``; comal's default refuses them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from ._demo_agent import prepare
from .cli import app
from .cli import main as cli_main
from .ledger import Scope, SQLiteLedger, open_ledger
from .messages import Message, ToolCall
from .ops import Sandbox, SandboxPolicy, default_protected_paths, sandbox_status

ROOT = Path(__file__).resolve().parents[2]
PLOT = Path("out") / "demo-replay.png"
# Small enough that the session crosses the threshold: old outputs become exact references.
DEMO_WINDOW = 8_000
# The agent's window: its build-log reads push it over, so the engine has to act mid-run.
AGENT_WINDOW = 20000
console = Console(highlight=False)


def _read(args: dict[str, str]) -> tuple[str, bool]:
    path = ROOT / args["path"]
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(f"{i:>5}\t{line}" for i, line in enumerate(lines, 1)), False


def _grep(args: dict[str, str]) -> tuple[str, bool]:
    pattern = re.compile(args["pattern"])
    hits = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{i}:{line}")
    return "\n".join(hits), False


def _bash(args: dict[str, str]) -> tuple[str, bool]:
    proc = subprocess.run(
        args["command"], shell=True, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    return f"{proc.stdout}{proc.stderr}[exit code {proc.returncode}]", proc.returncode != 0


TOOLS: dict[str, Callable[[dict[str, str]], tuple[str, bool]]] = {
    "Read": _read,
    "Grep": _grep,
    "Bash": _bash,
}

SCRIPT: list[tuple[str, list[tuple[str, dict[str, str]]]]] = [
    (
        "I'll start with the message model, since everything else is built on it.",
        [("Read", {"path": "src/comal/messages/_parts.py"})],
    ),
    (
        "Now the ledger schema and where steps are appended.",
        [
            ("Read", {"path": "src/comal/ledger/_schema.py"}),
            ("Grep", {"pattern": r"def (append|tail|verify)"}),
        ],
    ),
    ("What changed recently?", [("Bash", {"command": "git log --oneline -10 || true"})]),
    (
        "Let me check the tests import cleanly.",
        [("Bash", {"command": f"{sys.executable} -c 'import comal.nonexistent_module'"})],
    ),
    (
        "That module does not exist, as expected. One more look at the verifier.",
        [("Read", {"path": "src/comal/ledger/_verify.py"})],
    ),
    (
        "How are steps grouped, and how does the engine replay them?",
        [
            ("Read", {"path": "src/comal/messages/_steps.py"}),
            ("Grep", {"pattern": r"def (assemble|replay|split_view)"}),
        ],
    ),
    (
        "And the evidence reader that gets referenced bytes back.",
        [("Read", {"path": "src/comal/evidence/_read.py"})],
    ),
    ("Which tests cover the engine?", [("Bash", {"command": "ls tests | grep -c context"})]),
]


def build_session(led: SQLiteLedger) -> Scope:
    scope = led.create_session("demo", "scripted", title="demo: tour the comal sources")
    led.append(
        scope,
        [
            Message.system("You are a careful coding agent working in the comal repository."),
        ],
    )
    led.append(scope, [Message.user("Give me a tour of how comal stores a session.")])
    for n, (thought, calls) in enumerate(SCRIPT):
        tool_calls = [
            ToolCall(f"call_{n}_{k}", name, json.dumps(args))
            for k, (name, args) in enumerate(calls)
        ]
        results = []
        for call, (name, args) in zip(tool_calls, calls, strict=True):
            output, failed = TOOLS[name](args)
            results.append(Message.tool(call.id, output, is_error=failed))
            console.print(f"  ran {name}({next(iter(args.values()))}) → {len(output):,} chars")
        # One step, one transaction: the proposal and all its results land together.
        led.append(scope, [Message.assistant(thought, *tool_calls), *results])
    led.append(
        scope,
        [Message.assistant("The ledger keeps every step whole; outputs are stored exactly.")],
    )
    led.set_status(scope, "finished")
    return scope


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="comal-demo-") as tmp:
        db = Path(tmp) / "ledger.db"
        console.print(Rule("comal demo: a real session from real tool calls"))
        with open_ledger(db) as led:
            scope = build_session(led)
        for title, args in (
            ("comal sessions", ["sessions"]),
            ("comal show --tail 6", ["show", scope.session, "--tail", "6"]),
            ("comal context", ["context", scope.session]),
            (
                "comal context --context-window 8000",
                ["context", scope.session, "--context-window", "8000"],
            ),
            ("comal verify", ["verify"]),
            (
                f"comal replay --context-window {DEMO_WINDOW:,} (what the engine sent per call)",
                [
                    "replay",
                    scope.session,
                    "--context-window",
                    str(DEMO_WINDOW),
                    "--plot",
                    str(PLOT),
                ],
            ),
        ):
            console.print(Rule(title))
            _cli(db, args)
        agent_demo(Path(tmp), db)


def _cli(db: Path, args: list[str]) -> None:
    try:
        app(["--ledger", str(db), *args], standalone_mode=False)
    except SystemExit as exc:  # typer.Exit inside standalone_mode=False
        if exc.code:
            raise


def agent_demo(root: Path, db: Path) -> None:
    """A scripted model fixes a real bug; the house judges, runs and receipts every call."""
    workspace, model = prepare(root)
    config = root / "config.json"
    check = f"{sys.executable} check.py"
    # RES-5: the session may only be marked finished once this check passes.
    settings: dict[str, object] = {"checks": [check]}
    console.print(Rule("comal -p: a scripted model fixes a bug; the house judges every call"))
    box = sandbox_status()
    if not box.available:
        # The operator's opt-out, set in the demo's own configuration only: its scripted
        # commands in its temporary workspace. A real user's default still refuses.
        settings["sandbox"] = {"allow_unsandboxed": True}
        would = Sandbox(SandboxPolicy(), workspace, default_protected_paths(db))
        console.print(
            f"[yellow]No OS sandbox here: {escape(box.reason)}. This demo's own configuration "
            "lets its scripted commands run without it, in its temporary workspace; comal's "
            "default refuses Bash without a sandbox.[/]"
        )
        sandboxed = would.preview(["bash", "-c", check], workspace)
        console.print(f"[dim]With bubblewrap each would run as: {escape(sandboxed)}[/]")
    config.write_text(json.dumps(settings))
    os.environ["COMAL_CONFIG"] = str(config)
    try:
        cli_main(
            [
                "--ledger", str(db), "-p", "Fix calc.py so that check.py passes.",
                "--model", f"script:{model}", "--mode", "trusted",
                "--workspace", str(workspace), "--context-window", str(AGENT_WINDOW),
            ]
        )  # fmt: skip
    except SystemExit as exc:
        if exc.code:
            raise
    with open_ledger(db) as led:
        session = led.sessions(agent="comal")[-1].id
    for title, args in (
        ("comal sessions --agent comal", ["sessions", "--agent", "comal"]),
        ("comal receipts", ["receipts", session]),
        (
            "comal replay (what the engine sent at each call)",
            ["replay", session, "--context-window", str(AGENT_WINDOW)],
        ),
    ):
        console.print(Rule(title))
        _cli(db, args)
    fixed = (workspace / "calc.py").read_text()
    console.print(f"calc.py now divides by: {fixed.split('/')[-1].strip()}")


if __name__ == "__main__":
    main()
