"""The pipeline engine's settings: the source's defaults and ranges, camelCase names accepted."""

from __future__ import annotations

import pytest

from comal.context import engine_config, get_engine
from comal.context.pipeline import PipelineConfig
from comal.errors import InputError

ENGINE = get_engine("pipeline")

DEFAULTS = {
    "thinkingKeepTurns": (10, 1, 50),
    "historyTurns": (15, 3, 100),
    "evictionMinAge": (15, 3, 50),
    "observationKeepWindow": (25, 1, 50),
    "observationTriggerChars": (120_000, 50_000, 1_000_000),
    "observationDeactivationChars": (80_000, 20_000, 500_000),
    "ephemeralKeepWindow": (10, 1, 50),
    "compactionCooldownTurns": (5, 1, 50),
    "compactionPrefixAnchorTurns": (2, 0, 10),
}


@pytest.mark.parametrize(("alias", "spec"), sorted(DEFAULTS.items()))
def test_defaults_and_ranges_follow_the_source(alias: str, spec: tuple[int, int, int]) -> None:
    # covers: CFG-1, PIP-1
    default, low, high = spec
    config = PipelineConfig()
    field = next(n for n, f in PipelineConfig.model_fields.items() if f.alias == alias)
    assert getattr(config, field) == default
    schema = PipelineConfig.model_json_schema(by_alias=True)["properties"][alias]
    assert (schema["minimum"], schema["maximum"]) == (low, high)
    for bad in (low - 1, high + 1):
        if alias == "observationDeactivationChars" and bad > 120_000:
            continue  # caught by the gap rule below instead
        with pytest.raises(InputError) as info:
            engine_config(ENGINE, {alias: bad}, where="comal.toml")
        assert info.value.field == alias and "comal.toml" in str(info.value)


def test_camel_and_snake_names_and_the_gap_rule() -> None:
    # covers: CFG-1
    a = engine_config(ENGINE, {"historyTurns": 20, "observation_keep_window": 10})
    assert isinstance(a, PipelineConfig) and (a.history_turns, a.observation_keep_window) == (
        20,
        10,
    )
    with pytest.raises(InputError, match="below observationTriggerChars"):
        engine_config(
            ENGINE, {"observationTriggerChars": 90_000, "observationDeactivationChars": 95_000}
        )
    with pytest.raises(InputError):
        engine_config(ENGINE, {"historyTurnOverrides": {"group": 2}})
    with pytest.raises(InputError):
        engine_config(ENGINE, {"noSuchKey": 1})


def test_per_channel_history_turns() -> None:
    # covers: PIP-1
    config = PipelineConfig(historyTurnOverrides={"dm": 10, "group": 5}, channel="group")
    assert config.turns_kept == 5
    assert PipelineConfig(historyTurnOverrides={"dm": 10}, channel="group").turns_kept == 15
    assert ENGINE.threshold_ratio(PipelineConfig()) == 0.85
