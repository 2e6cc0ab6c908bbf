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

from comal.context import EngineConfig
from comal.importers import load, store
from comal.ledger import open_ledger
from comal.tokens import Budget
from comal.turns import replay

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", nargs="?", default=str(ROOT.parent / "shared" / "corpus"))
    parser.add_argument("--windows", default="45000,128000")
    parser.add_argument("--out")
    parser.add_argument(
        "--compact", action="store_true", help="One row per transcript, windows as columns."
    )
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
            stored_all = store(led, load(path))
            for k, stored in enumerate(stored_all):
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
                    if len(stored_all) > 1:
                        name += f" #{k + 1}"
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
    if args.compact:
        table = _compact(rows, windows, totals)
    print(table)
    if args.out:
        Path(args.out).write_text(
            "# Corpus replay through the limit engine\n\nProduced by "
            f"`.venv/bin/python bench/corpus_replay.py --windows {args.windows}`.\n\n"
            + table
            + "\n",
            encoding="utf-8",
        )


def _compact(rows: list[tuple[str, ...]], windows: list[int], totals: dict[int, list[int]]) -> str:
    by_name: dict[str, dict[str, tuple[str, ...]]] = {}
    for r in rows:
        by_name.setdefault(r[0], {})[r[1]] = r
    labels = [f"{w // 1000}k" for w in windows]
    head = ["transcript", "calls", "unmanaged"] + [f"comal {x}" for x in labels]
    lines = ["| " + " | ".join(head) + " |", "|---|--:|--:|" + "--:|" * len(labels)]
    for name, per in by_name.items():
        first = per[labels[0]]
        cells = [f"{per[x][4]} ({per[x][5]})" for x in labels]
        lines.append(f"| {name} | {first[2]} | {first[3]} | " + " | ".join(cells) + " |")
    full = totals[windows[0]][0]
    cells = [f"**{totals[w][1]:,} (×{full / totals[w][1]:.2f})**" for w in windows]
    lines.append(f"| **all** | | **{full:,}** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
