"""A fourth engine touches only its own package: ``tests/_fold_engine.py`` is an engine with its
own job type and handler, enabled as a plugin; the agent, ``/compact``, the maintenance after a
turn and a replay run it through the turn service and the executor table, and nothing under
``src/`` names it.

# covers: PLG-1, SRF-2
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from _agent_support import reply, rig, settings_for, text, tool
from comal.compaction import handler_table
from comal.context import get_engine
from comal.plugins import enable_plugins, reset_plugins
from comal.testing import ScriptedProvider
from comal.tokens import Budget, EstimatingCounter
from comal.turns import replay

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def fold() -> Iterator[None]:
    reset_plugins()
    enable_plugins(["_fold_engine"], where="the test")
    yield
    reset_plugins()


def test_the_fourth_engine_runs_everywhere_the_others_do(tmp_path: Path, fold: None) -> None:
    import _fold_engine as plugin

    engine = get_engine("fold")
    assert plugin.Fold in handler_table()
    r = rig(tmp_path)
    config = engine.config_type.model_validate({"counter": EstimatingCounter()})
    settings = settings_for(engine=config, engine_name="fold")
    # Outputs a checkpoint is smaller than (/compact stores none that is not smaller).
    steps = [reply(tool(f"b{i}", "Bash", command=f"seq {i} 400")) for i in range(8)]
    r.agent(ScriptedProvider([*steps, reply(text("done"))]), settings=settings).run("go")
    # The maintenance after a turn planned the plugin's job; its handler stored the fold.
    folded = r.ledger.records(r.scope, "event", kinds=(plugin.FOLDED,))
    checkpoints = r.ledger.checkpoints(r.scope)
    assert folded and len(checkpoints) == len(folded)
    assert [e.body["checkpoint"] for e in folded] == [c.id for c in checkpoints]
    # The next request stood on the fold: the agent assembled behind it.
    assert "Deterministic checkpoint" in r.ledger.requests(r.scope)[-1].meta.get("stage", "") or (
        r.ledger.requests(r.scope)[-1].meta["checkpoint"] is not None
    )
    # A replay rehearses the same job in memory, through the same table, writing nothing.
    entries = list(r.ledger.iter_entries(r.scope))
    budget = Budget.for_window(200_000, system_tokens=0, tools_tokens=0)
    made = [m for t in replay(entries, r.scope.session, budget, config, engine=engine)
            for m in t.made]  # fmt: skip
    assert made and all(getattr(m, "id", 0) < 0 for m in made)
    assert len(r.ledger.checkpoints(r.scope)) == len(checkpoints)
    r.close()


def test_comal_sources_know_nothing_of_the_fourth_engine() -> None:
    # The engine, its job and its handler were added without touching comal: no module under
    # src/ names them.
    for path in SRC.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        assert "_fold_engine" not in source and "FoldEngine" not in source, path


def test_without_the_plugin_the_engine_and_its_job_are_unknown() -> None:
    from comal.context import UnknownEngine

    reset_plugins()
    with pytest.raises(UnknownEngine):
        get_engine("fold")
    assert all(h.kind != "Fold" for h in handler_table().values())
