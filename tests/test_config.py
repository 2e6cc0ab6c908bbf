"""CFG-1: one configuration file, every field validated with its range, per-agent engines,
``comal config show`` / ``check`` / ``reference``; the reference doc is never stale."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from comal.agent import (
    AgentProfile,
    CacheConfig,
    Config,
    SpendConfig,
    check_config,
    configuration_reference,
    explain_config,
    load_config,
    settings_from_config,
)
from comal.cli import app
from comal.context import get_engine
from comal.errors import InputError

# covers: CFG-1

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


def _outside(info: Any) -> Iterator[Any]:
    """Values just outside a field's numeric bounds."""
    kind = info.annotation
    step: Any = 1 if kind in (int, int | None) else 1e-3
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            yield item.ge - step
        elif isinstance(item, annotated_types.Gt):
            yield item.gt
        elif isinstance(item, annotated_types.Le):
            yield item.le + step
        elif isinstance(item, annotated_types.Lt):
            yield item.lt


def _nest(key: str, value: Any) -> dict[str, Any]:
    out: Any = value
    for part in reversed(key.split(".")):
        out = {part: out}
    return dict(out)


def _bounded(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, Any]]:
    for name, info in model.model_fields.items():
        for value in _outside(info):
            yield f"{prefix}{name}", value


CASES = [
    *_bounded(Config, ""),
    *_bounded(SpendConfig, "spend."),
    *_bounded(CacheConfig, "cache."),
    *_bounded(AgentProfile, "agents.reviewer."),
    *_bounded(CacheConfig, "agents.reviewer.cache."),
    *_bounded(get_engine("limit").config_type, "engine_settings."),
    *_bounded(get_engine("limit").config_type, "agents.reviewer.engine_settings."),
]


def test_every_bounded_field_is_covered() -> None:
    keys = {key for key, _ in CASES}
    assert {"max_turns", "context_window", "spend.day", "cache.deferral_threshold"} <= keys
    assert "agents.reviewer.engine_settings.keep_recent_results" in keys
    assert len(CASES) > 40


@pytest.mark.parametrize(("key", "value"), CASES, ids=[f"{k}={v}" for k, v in CASES])
def test_out_of_range_names_file_key_and_allowed_range(
    tmp_path: Path, key: str, value: Any
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_nest(key, value)))
    with pytest.raises(InputError) as caught:
        load_config(path, env={})
    error = caught.value
    assert error.path == str(path)
    assert error.field == key
    assert "allowed: " in str(error), str(error)


def test_per_agent_engine_choice_settings_and_cache(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "engine_settings": {"keep_recent_results": 4},
                "cache": {"promote_after_turns": 6},
                "agents": {
                    "reviewer": {
                        "engine": "limit",
                        "engine_settings": {"keep_recent_results": 2},
                        "cache": {"tool_deferral": False},
                    },
                    # The form before the engine was chosen per agent: settings under engine.
                    "old": {"engine": {"keep_recent_results": 3}},
                },
            }
        )
    )
    config = load_config(path, env={})
    reviewer = settings_from_config(config, "m", agent="reviewer")
    old = settings_from_config(config, "m", agent="old")
    other = settings_from_config(config, "m")
    assert reviewer.engine.keep_recent_results == 2  # type: ignore[attr-defined]
    assert old.engine.keep_recent_results == 3  # type: ignore[attr-defined]
    assert other.engine.keep_recent_results == 4  # type: ignore[attr-defined]
    assert reviewer.engine_name == "limit"
    assert (reviewer.cache.tool_deferral, reviewer.cache.promote_after_turns) == (False, 6)
    assert (other.cache.tool_deferral, other.cache.promote_after_turns) == (True, 6)
    path.write_text(json.dumps({"agents": {"r": {"engine": "magic"}}}))
    with pytest.raises(InputError) as caught:
        load_config(path, env={})
    assert caught.value.field == "agents.r.engine" and "limit" in str(caught.value)


def test_yaml_toml_and_json_say_the_same(tmp_path: Path) -> None:
    data = {"mode": "trusted", "max_turns": 7, "spend": {"hour": 50_000}}
    (tmp_path / "c.json").write_text(json.dumps(data))
    (tmp_path / "c.toml").write_text('mode = "trusted"\nmax_turns = 7\n[spend]\nhour = 50000\n')
    files = [tmp_path / "c.json", tmp_path / "c.toml"]
    if importlib.util.find_spec("yaml") is not None:
        (tmp_path / "c.yaml").write_text("mode: trusted\nmax_turns: 7\nspend: {hour: 50000}\n")
        files.append(tmp_path / "c.yaml")
    loaded = [load_config(f, env={}) for f in files]
    assert all(c == loaded[0] for c in loaded) and loaded[0].spend.hour == 50_000
    (tmp_path / "bad.toml").write_text("mode = \n")
    with pytest.raises(InputError, match="not valid TOML") as caught:
        check_config(tmp_path / "bad.toml")
    assert caught.value.path == str(tmp_path / "bad.toml")


def test_config_show_says_where_each_value_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "mode": "read-only",
                "max_turns": 9,
                "context_window": 64_000,
                "agents": {"reviewer": {"max_turns": 3, "engine_settings": {"target_ratio": 0.5}}},
            }
        )
    )
    monkeypatch.setenv("COMAL_CONFIG", str(path))
    monkeypatch.setenv("COMAL_MODE", "trusted")
    result = runner.invoke(
        app, ["config", "show", "--json", "--engine", "limit", "--context-window", "32000"]
    )
    assert result.exit_code == 0, result.output
    shown = {s["key"]: s for s in json.loads(result.stdout)["settings"]}
    assert (shown["tenant"]["value"], shown["tenant"]["source"]) == ("local", "default")
    assert (shown["max_turns"]["value"], shown["max_turns"]["source"]) == (9, "file")
    assert (shown["mode"]["value"], shown["mode"]["source"]) == ("trusted", "env")
    assert shown["mode"]["origin"] == "COMAL_MODE"
    assert (shown["engine"]["source"], shown["context_window"]["source"]) == ("flag", "flag")
    assert shown["context_window"]["value"] == 32_000  # the minimum of file and flag
    assert shown["spend.day"]["operator_only"] and not shown["mode"]["operator_only"]
    assert shown["cache.promote_after_turns"]["allowed"] == "1..1,000"
    # One agent's view: its own entries, and where they were written.
    _, settings = explain_config(path, env={}, agent="reviewer")
    mine = {s.key: s for s in settings}
    assert (mine["max_turns"].value, mine["max_turns"].origin) == (3, "agents.reviewer.max_turns")
    assert mine["engine_settings.target_ratio"].value == 0.5
    assert mine["engine_settings.keep_recent_results"].source == "default"
    table = runner.invoke(app, ["config", "show"], env={"COLUMNS": "240"})
    assert table.exit_code == 0 and "operator-only" in table.stdout


def test_config_check_validates_a_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"max_turns": 3}))
    ok = runner.invoke(app, ["config", "check", str(good), "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["keys"] == ["max_turns"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"agents": {"x": {"engine_settings": {"target_ratio": 7}}}}))
    refused = runner.invoke(app, ["config", "check", str(bad), "--json"])
    assert refused.exit_code == 2
    message = json.loads(refused.stdout)["error"]["message"]
    assert str(bad) in message and "agents.x.engine_settings.target_ratio" in message
    assert "allowed: >0..<1" in message
    missing = runner.invoke(app, ["config", "check", str(tmp_path / "none.json")])
    assert missing.exit_code == 2


def test_the_configuration_reference_is_generated_and_current() -> None:
    doc = REPO / "docs" / "configuration.md"
    expected = configuration_reference()
    assert doc.read_text(encoding="utf-8") == expected, (
        "docs/configuration.md is stale: run `comal config reference > docs/configuration.md`"
    )
    for key in ("`max_turns`", "`cache.promote_after_turns`", "`agents.<name>.engine`",
                "`engine_settings.keep_recent_results`", "`limits.output_cap`"):  # fmt: skip
        assert key in expected
    printed = runner.invoke(app, ["config", "reference"])
    assert printed.exit_code == 0 and printed.stdout == expected
