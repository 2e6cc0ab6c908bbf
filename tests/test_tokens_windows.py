# covers: TOK-3
"""Effective window: catalog lookup, minimum of model / override / environment, fallback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from comal.errors import InputError
from comal.tokens import (
    FALLBACK_WINDOW,
    ModelInfo,
    load_catalog,
    lookup_model,
    resolve_window,
    user_models_file,
)

NO_USER_FILE = {"COMAL_MODELS_FILE": ""}


@pytest.fixture(autouse=True)
def isolated_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep the developer's own ~/.config/comal/models.json out of these tests."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("COMAL_MODELS_FILE", raising=False)
    monkeypatch.delenv("COMAL_CONTEXT_WINDOW", raising=False)


def test_fallback_is_45000_for_unknown_or_no_model() -> None:
    assert FALLBACK_WINDOW == 45_000
    for model in (None, "", "my-local-llama"):
        res = resolve_window(model, env=NO_USER_FILE)
        assert (res.window, res.source, res.max_output) == (45_000, "fallback", None)


@pytest.mark.parametrize(
    ("model", "name", "window", "max_output"),
    [
        ("gpt-4o", "gpt-4o", 128_000, 16_384),
        ("gpt-4o-2024-08-06", "gpt-4o", 128_000, 16_384),
        ("openai:gpt-4.1-mini", "gpt-4.1-mini", 1_047_576, 32_768),
        ("o4-mini-2025-04-16", "o4-mini", 200_000, 100_000),
        ("gpt-5", "gpt-5", 400_000, 128_000),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", 200_000, 64_000),
        ("anthropic:claude-opus-4-1", "claude-opus-4-1", 200_000, 32_000),
        ("claude-opus-4-20250514", "claude-opus-4", 200_000, 32_000),
        ("claude-sonnet-4-0", "claude-sonnet-4", 200_000, 64_000),
        ("claude-3-7-sonnet-latest", "claude-3-7-sonnet", 200_000, 64_000),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku", 200_000, 8_192),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5", 200_000, 64_000),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5", 200_000, 64_000),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5", 200_000, 64_000),
        ("models/gemini-2.5-pro", "gemini-2.5-pro", 1_048_576, 65_536),
        ("gemini-2.5-flash-preview-09-2025", "gemini-2.5-flash", 1_048_576, 65_536),
        ("gemini-2.0-flash-001", "gemini-2.0-flash", 1_048_576, 8_192),
    ],
)
def test_catalog_lookup(model: str, name: str, window: int, max_output: int) -> None:
    info = lookup_model(model, env=NO_USER_FILE)
    assert info is not None
    assert (info.name, info.context_window, info.max_output) == (name, window, max_output)
    res = resolve_window(model, env=NO_USER_FILE)
    assert (res.window, res.max_output, res.source) == (window, max_output, f"catalog:{name}")


def test_gpt5_carries_its_separate_input_cap() -> None:
    res = resolve_window("gpt-5-mini", env=NO_USER_FILE)
    assert res.max_input == 272_000 and res.window == 400_000


def test_catalog_covers_the_required_families() -> None:
    names = {info.name for info, _ in load_catalog(NO_USER_FILE).values()}
    for required in (
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "o3",
        "o4-mini",
        "gpt-5",
        "gpt-5-mini",
        "claude-opus-4",
        "claude-sonnet-4",
        "claude-3-7-sonnet",
        "claude-3-5-haiku",
        "claude-haiku-4-5",
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-2.0-flash",
    ):
        assert required in names


def test_explicit_values_combine_with_the_model_by_minimum() -> None:
    assert resolve_window("gpt-4o", override=64_000, env=NO_USER_FILE).source == "override"
    assert resolve_window("gpt-4o", override=64_000, env=NO_USER_FILE).window == 64_000
    # A larger explicit value cannot grow a known model's window.
    res = resolve_window("gpt-4o", override=500_000, env=NO_USER_FILE)
    assert (res.window, res.source) == (128_000, "catalog:gpt-4o")
    env = {**NO_USER_FILE, "COMAL_CONTEXT_WINDOW": "32000"}
    res = resolve_window("gpt-4o", override=64_000, env=env)
    assert (res.window, res.source) == (32_000, "env:COMAL_CONTEXT_WINDOW")
    assert res.max_output == 16_384  # the model's output cap is still known


def test_explicit_value_sets_the_window_of_an_unknown_model() -> None:
    res = resolve_window("my-local-llama", override=100_000, env=NO_USER_FILE)
    assert (res.window, res.source) == (100_000, "override")


@pytest.mark.parametrize(
    ("raw", "tokens"),
    [
        ("120000", 120_000),
        ("120_000", 120_000),
        ("120,000", 120_000),
        (" 128k ", 128_000),
        ("1M", 1_000_000),
    ],
)
def test_environment_value_forms(raw: str, tokens: int) -> None:
    res = resolve_window(None, env={**NO_USER_FILE, "COMAL_CONTEXT_WINDOW": raw})
    assert res.window == tokens


@pytest.mark.parametrize("raw", ["0", "-5", "lots", "12.5", "1e5", "128kb"])
def test_bad_environment_value_names_the_variable(raw: str) -> None:
    with pytest.raises(InputError, match="COMAL_CONTEXT_WINDOW") as err:
        resolve_window("gpt-4o", env={**NO_USER_FILE, "COMAL_CONTEXT_WINDOW": raw})
    assert err.value.field == "COMAL_CONTEXT_WINDOW"


def test_empty_environment_value_is_unset() -> None:
    res = resolve_window("gpt-4o", env={**NO_USER_FILE, "COMAL_CONTEXT_WINDOW": "  "})
    assert res.window == 128_000


@pytest.mark.parametrize("bad", [0, -1, True])
def test_bad_override_is_an_input_error(bad: int) -> None:
    with pytest.raises(InputError, match="--context-window"):
        resolve_window("gpt-4o", override=bad, env=NO_USER_FILE)


def _write_models(path: Path, models: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"models": models}), encoding="utf-8")
    return path


def test_user_file_overrides_and_extends_the_catalog(tmp_path: Path) -> None:
    path = _write_models(
        tmp_path / "models.json",
        [
            {"name": "gpt-4o", "provider": "azure", "context_window": 64_000, "max_output": 4096},
            {"name": "qwen3-coder", "provider": "local", "context_window": 262_144},
            {"name": "qwen3:32b", "provider": "ollama", "context_window": 40_960},
        ],
    )
    env = {"COMAL_MODELS_FILE": str(path)}
    res = resolve_window("gpt-4o-2024-11-20", env=env)
    assert (res.window, res.max_output, res.source) == (64_000, 4096, "user-catalog:gpt-4o")
    assert lookup_model("local:qwen3-coder", env=env) == ModelInfo(
        "qwen3-coder", "local", 262_144, None
    )
    assert resolve_window("qwen3:32b", env=env).window == 40_960
    # Built-ins the file does not mention are still there.
    assert resolve_window("o3", env=env).window == 200_000


def test_user_file_in_the_platform_config_folder(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "comal"
    folder.mkdir(parents=True)
    path = _write_models(folder / "models.json", [{"name": "tiny", "context_window": 8192}])
    assert user_models_file({}) == path
    assert resolve_window("tiny", env={}).window == 8192
    assert user_models_file(NO_USER_FILE) is None


def test_edited_user_file_is_read_again(tmp_path: Path) -> None:
    path = _write_models(tmp_path / "m.json", [{"name": "tiny", "context_window": 8192}])
    env = {"COMAL_MODELS_FILE": str(path)}
    assert resolve_window("tiny", env=env).window == 8192
    _write_models(path, [{"name": "tiny", "context_window": 16_384}])
    assert resolve_window("tiny", env=env).window == 16_384


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"models": {}}', "expected a JSON object"),
        ('{"models": [{"context_window": 5}]}', "non-empty string name"),
        ('{"models": [{"name": "x", "context_window": 0}]}', "positive whole number"),
        ('{"models": [{"name": "x", "context_window": 9, "max_output": "big"}]}', "positive"),
    ],
)
def test_bad_user_file_is_an_input_error_naming_the_file(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "models.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message) as err:
        resolve_window("gpt-4o", env={"COMAL_MODELS_FILE": str(path)})
    assert err.value.path == str(path)


def test_models_file_variable_must_point_at_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="COMAL_MODELS_FILE"):
        resolve_window("gpt-4o", env={"COMAL_MODELS_FILE": str(tmp_path / "nope.json")})


windows = st.one_of(st.none(), st.integers(min_value=1, max_value=10**7))


@given(model=st.sampled_from([None, "gpt-4o", "gemini-2.5-pro", "unknown-x"]), o=windows, e=windows)
def test_window_is_the_minimum_of_what_is_known(
    model: str | None, o: int | None, e: int | None
) -> None:
    env = {**NO_USER_FILE, **({"COMAL_CONTEXT_WINDOW": str(e)} if e is not None else {})}
    known = lookup_model(model, env=NO_USER_FILE) if model else None
    candidates = [v for v in (known and known.context_window, o, e) if v]
    expected = min(candidates) if candidates else FALLBACK_WINDOW
    assert resolve_window(model, override=o, env=env).window == expected
