"""The agent half of ``make demo``: a scripted model fixes a real bug in a temporary project.

The model is a script (``--model script:PATH``, no network, no key); everything else is real:
the house judges each call, the tools read, edit and run files in a temporary workspace, the
window is small enough that the engine references old output and derives a checkpoint, and the
run ends only after the configured check passes. The demo then prints the receipts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

BUGGY = '''def mean(values):
    """The arithmetic mean of a non-empty list."""
    return sum(values) / (len(values) + 1)
'''

CHECK = """from calc import mean

assert mean([2, 4, 6]) == 4, mean([2, 4, 6])
print("check passed")
"""

# A large, realistic-looking log the agent reads: it pushes the session past the window.
LOG_LINES = 600
PARTS = 8


def _tool(n: int, name: str, args: dict[str, Any], text: str = "") -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": f"toolu_demo_{n:02d}", "name": name, "input": args})
    # No usage: a script measures nothing, so the status shows estimates (ctx ~), honestly.
    return {"content": content, "stop_reason": "tool_use"}


def script() -> list[dict[str, Any]]:
    """The model's replies, in Anthropic Messages form (one per model call)."""
    py = sys.executable
    chunk = LOG_LINES // PARTS
    reads = [
        _tool(3 + k, "Read", {"path": "build.log", "offset": k * chunk + 1, "limit": chunk},
              f"Build log, part {k + 1} of {PARTS}.")
        for k in range(PARTS)
    ]  # fmt: skip
    return [
        _tool(1, "Bash", {"command": f"{py} check.py"}, "First, reproduce the failure."),
        _tool(2, "Read", {"path": "calc.py"}, "The mean is off; let me read calc.py."),
        *reads,
        _tool(3 + PARTS, "Grep", {"pattern": "cache miss", "path": "build.log"}, "Cache misses?"),
        _tool(
            4 + PARTS,
            "Edit",
            {"path": "calc.py", "old_string": "len(values) + 1", "new_string": "len(values)"},
            "The divisor counts one value too many.",
        ),
        _tool(5 + PARTS, "Bash", {"command": f"{py} check.py"}, "Run the check again."),
        {
            "content": [{"type": "text", "text": "Fixed: mean() divided by len + 1."}],
            "stop_reason": "end_turn",
        },
    ]


def prepare(root: Path) -> tuple[Path, Path]:
    """A workspace with the bug, and the script file the model reads its replies from."""
    workspace = root / "project"
    workspace.mkdir()
    (workspace / "calc.py").write_text(BUGGY)
    (workspace / "check.py").write_text(CHECK)
    lines = [
        f"2026-11-29T10:{i // 60:02d}:{i % 60:02d} INFO build step {i}: compiled module_{i}.py "
        f"in {0.01 * (i % 97):.2f}s, cache {'hit' if i % 3 else 'miss'}"
        for i in range(LOG_LINES)
    ]
    (workspace / "build.log").write_text("\n".join(lines) + "\n")
    path = root / "model.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in script()) + "\n")
    return workspace, path
