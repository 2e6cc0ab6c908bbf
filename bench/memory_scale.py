"""How memory_search, the memory list and forget scale with the ledger (DRV-7, MEM-2).

Builds an SQLite ledger of ``--sessions`` sessions of one agent with ``--entries`` entries each
(words drawn from a fixed vocabulary, a few naming ``.txt`` files and saying hello, one in a
thousand holding ``hello.txt``), ``--memories`` facts remembered per session, 200 notes and 50
forgets, plus as many sessions of a second agent; then times, median of ``--runs``:

- ``memory_search`` for ``hello.txt`` (the issue's query: a phrase and an exact match), and
  apart its two parts: the full-text queries by its words (all a search ran before exact
  matches) and by its phrase; for a rare word, and for a common one;
- the first page of ``comal memory list`` and a page deep in the history (``--before``);
- one forget.

It prints one line per size and the query plans' table accesses (no plan scans a table: each is
an index or the full-text index). Not a test; ``tests/test_memory_manage.py`` checks the plans:

    .venv/bin/python bench/memory_scale.py --sessions 100 1000 --entries 100
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from comal.ledger import MemoryInput, open_ledger
from comal.memory import add_note, forget, list_memories, memory_search
from comal.messages import Message

_VOCAB = [f"w{i}" for i in range(5_000)]
_COMMON = ["the", "file", "test", "run", "make"]


def _text(rng: random.Random, k: int) -> str:
    words = rng.choices(_VOCAB, k=12) + rng.choices(_COMMON, k=4)
    if k % 50 == 0:
        words += ["hello", "notes.txt"]  # the noise the issue saw
    if k % 1_000 == 0:
        words += ["cat", "hello.txt"]
    rng.shuffle(words)
    return " ".join(words)


def build(path: Path, sessions: int, entries: int, memories: int) -> Any:
    rng = random.Random(7)
    led = open_ledger(path)
    k = 0
    for agent in ("coder", "other"):
        for _ in range(sessions):
            batch = []
            for _ in range(entries):
                k += 1
                make = Message.user if k % 2 else Message.assistant
                batch.append(make(_text(rng, k)))
            scope = led.create_session("acme", agent, messages=batch)
            facts = [
                MemoryInput("decision", f"decided {_text(rng, k + i)}", (i % entries,))
                for i in range(memories)
            ]
            led.add_memories(scope, 0, entries - 1, facts, why="bench", extractor="extractive")
    for i in range(200):
        add_note(led, "acme", "coder", f"note {i}: {_text(rng, i)}", by="bench")
    for m, _ in led.agent_memories("acme", "coder", limit=50):
        forget(led, "acme", "coder", m.id, by="bench", why="bench")
    return led


def _median_ms(fn: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(led: Any, runs: int) -> dict[str, float]:
    memory_search(led, "acme", "coder", "w1 w2")  # the entries' index caught up first
    deep = list_memories(led, "acme", "coder", limit=200).next
    first = led.agent_memories("acme", "other", limit=1)[0][0].id
    victims = iter(range(first, 0, -1))

    def words_only() -> None:  # the two full-text queries memory_search ran before DRV-7
        led.search_memories("acme", "coder", "hello.txt")
        led.search_sessions("acme", "coder", "hello.txt")

    def phrase_only() -> None:  # what DRV-7 adds: the phrase queries (the texts read after)
        led.search_memories("acme", "coder", "hello.txt", phrase=True, limit=50)
        led.search_sessions("acme", "coder", "hello.txt", phrase=True, limit=50)

    return {
        "hello.txt": _median_ms(lambda: memory_search(led, "acme", "coder", "hello.txt"), runs),
        "(its words)": _median_ms(words_only, runs),
        "(its phrase)": _median_ms(phrase_only, runs),
        "rare word": _median_ms(lambda: memory_search(led, "acme", "coder", "w4242"), runs),
        "common word": _median_ms(lambda: memory_search(led, "acme", "coder", "file"), runs),
        "list page 1": _median_ms(lambda: list_memories(led, "acme", "coder"), runs),
        "list deep": _median_ms(lambda: list_memories(led, "acme", "coder", before=deep), runs),
        "forget": _median_ms(lambda: forget(led, "acme", "other", next(victims), by="bench"), runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[100, 1_000])
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--memories", type=int, default=20)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for n in args.sessions:
            path = Path(folder) / f"ledger-{n}.db"
            start = time.perf_counter()
            led = build(path, n, args.entries, args.memories)
            built = time.perf_counter() - start
            rows = 2 * n * args.entries
            took = measure(led, args.runs)
            shown = "  ".join(f"{k} {v:.1f} ms" for k, v in took.items())
            print(f"{rows:>9,} entries, {2 * n * args.memories:>8,} memories (built in "
                  f"{built:.0f} s): {shown}")  # fmt: skip
            led.close()


if __name__ == "__main__":
    main()
