"""Replay every corpus transcript through the limit engine at several windows.

    .venv/bin/python bench/corpus_replay.py [CORPUS_DIR] [--windows 45000,128000] [--out FILE]

Prints (and with --out writes) a markdown table: per transcript and window, the model calls,
the tokens an unmanaged agent would send over the run (the whole history at every call), what
the engine sends, the reduction factor, checkpoints, references, calls whose unmanaged history
is over the window, and coded errors. The counter is the ledger's (exact cl100k when available).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from comal.context import EngineConfig, replay
from comal.importers import load, store
from comal.ledger import open_ledger
from comal.tokens import Budget

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", nargs="?", default=str(ROOT.parent / "shared" / "corpus"))
    parser.add_argument("--windows", default="45000,128000")
    parser.add_argument("--out")
    args = parser.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    files = sorted(
        p
        for p in Path(args.corpus).rglob("*")
        if p.suffix in {".json", ".jsonl", ".traj"} and "locomo" not in p.parts
    )
    rows = []
    totals = {w: [0, 0] for w in windows}
    with tempfile.TemporaryDirectory() as tmp, open_ledger(Path(tmp) / "r.db") as led:
        for path in files:
            for stored in store(led, load(path)):
                scope = led.resolve(stored.session)
                entries = list(led.iter_entries(scope))
                calls = sum(1 for e in entries[1:] if e.role == "assistant")
                if calls < 2:
                    continue
                for window in windows:
                    budget = Budget.for_window(window, system_tokens=0, tools_tokens=0)
                    turns = list(replay(entries, scope.session, budget, EngineConfig()))
                    full = sum(t.full_tokens for t in turns)
                    sent = sum(t.input_tokens for t in turns)
                    totals[window][0] += full
                    totals[window][1] += sent
                    name = f"{path.parent.name}/{path.name[:44]}"
                    if len(stored.session) and stored.format != path.parent.name:
                        name += f" ({stored.format})"
                    errors = sorted({t.error for t in turns if t.error})
                    rows.append(
                        (
                            name,
                            f"{window // 1000}k",
                            str(len(turns)),
                            f"{full:,}",
                            f"{sent:,}",
                            f"×{full / sent:.2f}" if sent else "—",
                            str(sum(1 for t in turns if t.checkpoint is not None)),
                            str(
                                sum(
                                    1
                                    for t in turns
                                    for a in t.actions
                                    if type(a).__name__ == "Referenced"
                                )
                            ),
                            str(sum(1 for t in turns if t.full_tokens > budget.input_limit)),
                            ", ".join(e for e in errors if e) or "—",
                        )
                    )
            print(f"replayed {path.name}", file=sys.stderr)
    head = (
        "transcript",
        "window",
        "calls",
        "tokens sent, unmanaged",
        "tokens sent, comal",
        "reduction",
        "checkpoints",
        "references",
        "calls over window, unmanaged",
        "errors",
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    for w, (full, sent) in totals.items():
        lines.append(
            f"| **all** | {w // 1000}k | | {full:,} | {sent:,} | ×{full / sent:.2f} | | | | |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(
            "# Corpus replay through the limit engine\n\nProduced by "
            f"`.venv/bin/python bench/corpus_replay.py --windows {args.windows}`.\n\n"
            + table
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
