"""The survival benchmark looks values up as the model would, within the search limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from comal.bench._survival import _searchable
from comal.ledger import MAX_WORDS, SearchTooBroad, open_ledger
from comal.messages import Message


def test_a_value_longer_than_a_words_search_is_looked_up_by_its_first_words(
    tmp_path: Path,
) -> None:
    # covers: DAG-7
    # A long command among a chunk's exact values stopped `comal bench compare` with
    # SEARCH_TOO_BROAD once recall searches were bounded.
    command = " ".join(f"--flag{n}=Value{n}" for n in range(60))
    with open_ledger(tmp_path / "s.db") as led:
        scope = led.create_session("t", "a")
        led.append(scope, [Message.user(f"run {command}")])
        with pytest.raises(SearchTooBroad):
            led.recall_search(scope, command, limit=10, summaries=False)  # the attack, mounted
        query = _searchable(command)
        assert len(set(query.split())) == MAX_WORDS
        hits = led.recall_search(scope, query, limit=10, summaries=False)
        assert [h.seq for h in hits] == [0]  # found
        assert _searchable("make test") == "make test"
