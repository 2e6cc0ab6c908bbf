"""The engine seam: one registry, one protocol, pure engines, jobs executed one layer up."""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections import OrderedDict
from pathlib import Path
from types import ModuleType

import pytest

import comal.context as context
from _context_sessions import COUNTER, SYSTEM, budget, new_ledger
from comal.agent import AgentSettings, load_config, settings_from_config
from comal.compaction import JobFailed, Rehearsal, execute, rehearse
from comal.context import (
    ENGINES,
    Engine,
    EngineCache,
    EngineConfig,
    Job,
    LimitEngine,
    StoreCheckpoint,
    UnknownEngine,
    View,
    assemble,
    engine_config,
    get_engine,
)
from comal.context._render import Memo
from comal.errors import InputError
from comal.ledger import SQLiteLedger
from comal.messages import Message, ToolCall
from comal.turns import replay

CONFIG = EngineConfig(counter=COUNTER)


def _grow(ledger: SQLiteLedger, steps: int, size: int = 3_000) -> None:
    scope = ledger.sessions()[0].scope
    ledger.append(scope, [Message.user("fix the parser")])
    for n in range(steps):
        call = ToolCall(f"c{n}", "Bash", json.dumps({"command": f"cat part{n}.txt"}))
        output = "\n".join(f"line {n}.{i} {'x' * 40}" for i in range(size // 50))
        ledger.append(scope, [Message.assistant(f"step {n}", call), Message.tool(call.id, output)])


def test_the_registry_is_read_only_and_names_what_it_has() -> None:
    # covers: CFG-2
    assert "limit" in ENGINES
    with pytest.raises(TypeError):
        ENGINES["evil"] = LimitEngine()  # type: ignore[index]
    with pytest.raises(UnknownEngine) as info:
        get_engine("magic")
    assert info.value.code == "UNKNOWN_ENGINE"
    assert "limit" in str(info.value)


def test_every_engine_keeps_the_protocol() -> None:
    for name, engine in ENGINES.items():
        assert isinstance(engine, Engine)
        assert engine.name == name
        config = engine.config_type()
        assert 0 < engine.threshold_ratio(config) <= 1
        assert engine.bases <= {"checkpoint", "summaries"}


def test_the_limit_engine_through_the_registry_is_byte_identical(tmp_path: Path) -> None:
    # covers: LIM-1, LIM-2, LIM-3
    ledger, scope = new_ledger(tmp_path / "seam.db")
    _grow(ledger, 40)
    engine = get_engine("limit")
    view = View.from_ledger(ledger, scope, system=(SYSTEM,), bases=engine.bases)
    direct = assemble(view, budget(16_000), CONFIG)
    seam = engine.assemble(view, budget(16_000), CONFIG)
    assert direct.actions  # the window forced the engine to work
    assert seam.fingerprint() == direct.fingerprint()
    assert seam == direct
    ledger.close()


def test_a_warm_cache_changes_no_byte(tmp_path: Path) -> None:
    ledger, scope = new_ledger(tmp_path / "cache.db")
    _grow(ledger, 40)
    view = View.from_ledger(ledger, scope, system=(SYSTEM,))
    cache = EngineCache()
    first = assemble(view, budget(16_000), CONFIG, cache=cache)
    warm = assemble(view, budget(16_000), CONFIG, cache=cache)
    cold = assemble(view, budget(16_000), CONFIG)
    assert first.fingerprint() == warm.fingerprint() == cold.fingerprint()
    ledger.close()


def _mutable_globals(module: ModuleType) -> list[str]:
    found = []
    for name, value in vars(module).items():
        if name.startswith("__"):
            continue
        if isinstance(value, (dict, list, set, bytearray, OrderedDict, Memo, EngineCache)):
            found.append(f"{module.__name__}.{name}")
    return found


def test_engines_hold_no_module_global_mutable_state() -> None:
    # Engines are pure in fact, not by convention: whatever they remember lives in the
    # caller's EngineCache, never in a module.
    offenders: list[str] = []
    for info in pkgutil.walk_packages(context.__path__, prefix="comal.context."):
        offenders += _mutable_globals(importlib.import_module(info.name))
    offenders += _mutable_globals(context)
    assert offenders == []


def test_compact_is_planned_by_the_engine_and_executed_above_it(tmp_path: Path) -> None:
    # covers: LIM-7
    ledger, scope = new_ledger(tmp_path / "compact.db")
    _grow(ledger, 12, size=400)
    engine = get_engine("limit")
    view = View.from_ledger(ledger, scope, bases=engine.bases)
    assert engine.plan(view, budget(128_000), CONFIG) == ()  # nothing due under the threshold
    jobs = engine.plan(view, budget(128_000), CONFIG, force=True)
    assert [type(j) for j in jobs] == [StoreCheckpoint]
    made = execute(ledger, scope, jobs)
    stored = ledger.latest_checkpoint(scope)
    assert stored is not None and made == (stored,)
    ledger.close()


def test_an_unknown_job_is_refused_not_skipped(tmp_path: Path) -> None:
    ledger, scope = new_ledger(tmp_path / "job.db")

    class Mystery(Job):
        pass

    with pytest.raises(JobFailed, match="Mystery"):
        execute(ledger, scope, [Mystery()])
    with pytest.raises(JobFailed):
        rehearse(Rehearsal(View(()), context.Bases(), CONFIG, COUNTER), [Mystery()])
    ledger.close()


class _Planner(LimitEngine):
    """The limit engine, asking for maintenance on every turn."""

    name = "planner"

    def plan(self, view, budget, config, *, force=False, cache=None):  # type: ignore[no-untyped-def]
        return super().plan(view, budget, config, force=True, cache=cache)


def test_replay_executes_planned_jobs_in_memory_only(tmp_path: Path) -> None:
    ledger, scope = new_ledger(tmp_path / "replay.db")
    _grow(ledger, 12, size=400)
    entries = list(ledger.iter_entries(scope))
    turns = list(replay(entries, scope.session, budget(128_000), CONFIG, engine=_Planner()))
    made = [m for t in turns for m in t.made]
    assert made and all(m.id < 0 for m in made)  # type: ignore[attr-defined]
    assert ledger.checkpoints(scope) == []  # a replay never writes
    ledger.close()


def test_the_configured_engine_is_validated_at_load(tmp_path: Path) -> None:
    # covers: CFG-1, CFG-2
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"engine": "magic"}))
    with pytest.raises(InputError) as info:
        load_config(bad, env={})
    assert info.value.field == "engine" and "limit" in str(info.value)
    bad.write_text(json.dumps({"engine_settings": {"keep_recent_results": 0}}))
    with pytest.raises(InputError, match="keep_recent_results"):
        load_config(bad, env={})
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"engine": "limit", "engine_settings": {"keep_recent_results": 7}}))
    settings = settings_from_config(load_config(good, env={}), "openai:gpt-4o")
    assert settings.engine_name == "limit"
    assert isinstance(settings.engine, EngineConfig)
    assert settings.engine.keep_recent_results == 7
    with pytest.raises(InputError, match="limit"):
        engine_config(get_engine("limit"), {"no_such": 1})


def test_settings_refuse_a_config_of_another_engine() -> None:
    with pytest.raises(UnknownEngine):
        AgentSettings.for_model("openai:gpt-4o", engine_name="magic")
