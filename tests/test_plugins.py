"""The plugin seam (PLG-1): plugins add operations, model schemes and engines to the one registry
of each, enabled by the operator only (the configuration's ``plugins:`` or an installed entry
point); their operations are judged and receipted like native ones, and the model cannot load
one. The example plugin of ``docs/plugins.md`` is installed and run from the doc itself."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from comal.agent import OPERATOR_ONLY, Flags, Runtime, load_config
from comal.context import ENGINES, get_engine
from comal.errors import InputError
from comal.ledger import SQLiteLedger
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, Workspace, default_registry, receipts
from comal.plugins import (
    PluginConflict,
    PluginHookError,
    PluginLoadError,
    enable_plugins,
    job_handlers,
    plugin_infos,
    reset_plugins,
)
from comal.providers import ModelSpec, ProviderConfigError, provider_schemes

REPO = Path(__file__).resolve().parent.parent
COMAL = Path(sys.executable).parent / "comal"
EXAMPLE = "comal_wordcount"

# An engine and a job handler, as an installed package would declare them.
BRIEF = """
from dataclasses import dataclass

from comal.compaction import JobHandler
from comal.context import Job, LimitEngine
from comal.plugins import hookimpl


class BriefEngine(LimitEngine):
    name = "brief"
    description = "the limit engine under another name"


@dataclass(frozen=True)
class NoteJob(Job):
    text: str = ""


def note(run, job):
    run.ledger.add_record(run.scope, "event", "note", {"text": job.text})


@hookimpl
def comal_engines():
    return [BriefEngine()]


@hookimpl
def comal_job_handlers():
    return [JobHandler(NoteJob, note)]
"""


def example_source() -> str:
    """The example plugin exactly as docs/plugins.md shows it."""
    doc = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    found = re.search(rf"<!-- example: {EXAMPLE}\.py -->\n```python\n(.*?)```\n", doc, re.S)
    assert found is not None, "docs/plugins.md lost its example block"
    return found.group(1)


def write_module(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    importlib.invalidate_caches()
    return path


def entry_point_site(folder: Path) -> Path:
    """A directory that holds a module and the dist-info declaring it as an entry point."""
    write_module(folder, "brief_engine", BRIEF)
    dist = folder / "comal_brief-1.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: comal-brief\nVersion: 1.2\n")
    (dist / "entry_points.txt").write_text("[comal.plugins]\nbrief = brief_engine\n")
    return folder


@pytest.fixture
def mods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path for plugin modules; the process's plugins are forgotten before
    and after, so no other test sees what this one enabled."""
    folder = tmp_path / "mods"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    reset_plugins()
    before = set(sys.modules)
    yield folder
    reset_plugins()
    for name in set(sys.modules) - before:
        if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(tmp_path)):
            del sys.modules[name]


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(COMAL), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_documented_example_runs_through_the_real_cli(tmp_path: Path) -> None:
    # covers: PLG-1
    source = example_source()
    assert len([line for line in source.splitlines() if line.strip()]) <= 40
    write_module(tmp_path / "mods", EXAMPLE, source)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"plugins": [EXAMPLE]}))
    ws = tmp_path / "ws"
    ws.mkdir()
    env = os.environ | {
        "PYTHONPATH": str(tmp_path / "mods"),
        "COMAL_CONFIG": str(config),
        "COMAL_LEDGER": str(tmp_path / "l.db"),
    }
    run = cli("-p", "count these four words", "--model", "echo:any", "--workspace", str(ws),
              "--json", env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert (result["status"], result["answer"]) == ("finished", "echo: 4 words")
    (receipt,) = result["receipts"]
    assert (receipt["operation"], receipt["status"]) == ("WordCount", "ok")
    assert receipt["judgment"]["decision"] == "allow" and receipt["surface"] == "model"
    # The receipt is in the ledger: another command reads it back.
    stored = cli("receipts", result["session"], "--json", env=env)
    assert [r["operation"] for r in json.loads(stored.stdout)] == ["WordCount"]
    listed = json.loads(cli("plugins", "--json", env=env).stdout)
    mine = next(row for row in listed if row["name"] == EXAMPLE)
    assert (mine["source"], mine["operations"], mine["providers"]) == ("config", ["WordCount"],
                                                                        ["echo"])  # fmt: skip
    assert [row["source"] for row in listed[:4]] == ["builtin"] * 4
    doctor = json.loads(cli("doctor", "--json", env=env).stdout)
    line = next(c for c in doctor if c["check"] == f"plugin {EXAMPLE}")
    assert line["ok"] and "WordCount" in line["detail"] and "echo" in line["detail"]
    tools = json.loads(cli("tools", "--json", env=env).stdout)
    assert "WordCount" in [t["name"] for t in tools]


def test_an_installed_entry_point_enables_a_plugin(tmp_path: Path, mods: Path) -> None:
    # covers: PLG-1
    site = entry_point_site(tmp_path / "site")
    env = os.environ | {"PYTHONPATH": str(site)}
    listed = json.loads(cli("plugins", "--json", env=env).stdout)
    brief = next(row for row in listed if row["name"] == "brief")
    assert brief["source"] == "entry point" and brief["version"] == "1.2"
    assert (brief["engines"], brief["job_handlers"]) == (["brief"], ["NoteJob"])
    # In process: the engine joins the read-only registry, the handler the flattened list.
    sys.path.insert(0, str(site))
    try:
        reset_plugins()
        assert get_engine("brief").name == "brief" and list(ENGINES)[:3] == [
            "limit", "dag", "pipeline",
        ]  # fmt: skip
        assert [h.kind for h in job_handlers() if h.kind == "NoteJob"] == ["NoteJob"]
        assert load_config(_config(tmp_path, {"engine": "brief"})).engine == "brief"
        with pytest.raises(TypeError):
            ENGINES["brief"] = get_engine("limit")  # type: ignore[index]
    finally:
        sys.path.remove(str(site))


def test_a_plugin_operation_is_judged_and_receipted_like_a_native_one(
    tmp_path: Path, mods: Path, ledger: SQLiteLedger
) -> None:
    # covers: PLG-1
    write_module(mods, EXAMPLE, example_source())
    enable_plugins([EXAMPLE])
    registry = default_registry()
    assert "WordCount" in registry.catalog("model").names
    scope = ledger.create_session("local", "comal")
    ledger.append(scope, [Message.user("count the words")])
    ws = Workspace(tmp_path)

    def handle(policy: dict[str, Any], call_id: str) -> Any:
        house = House(ledger, scope, registry, Policy.from_config(policy), workspace=ws)
        call = ToolCall(call_id, "WordCount", json.dumps({"text": "one two three"}))
        ledger.append(scope, [Message.assistant("", call)])
        return house.handle(call, Actor.user("tester"))[0]

    ran = handle({"mode": "read-only"}, "c1")
    assert ran.receipt.status == "ok" and ran.result.text == "3 words"
    denied = handle({"mode": "trusted", "deny": ["WordCount"]}, "c2")
    assert denied.receipt.status == "denied" and denied.judgment.decision.rule == "WordCount"
    assert [(r.operation, r.status) for r in receipts(ledger, scope)] == [
        ("WordCount", "ok"),
        ("WordCount", "denied"),
    ]


def test_a_plugin_operation_is_counted_in_the_context(
    tmp_path: Path, mods: Path, ledger: SQLiteLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: PLG-1
    write_module(mods, EXAMPLE, example_source())
    scope = ledger.create_session("local", "comal", meta={"workspace": str(tmp_path)})
    ledger.append(scope, [Message.user("hi")])

    def tools_tokens() -> int:
        """What ``comal context`` (= /context) counts for the tool schemas the model is sent."""
        flags = Flags(model="echo:any", workspace=tmp_path)
        with Runtime.open(ledger, flags, resume=scope.session, need_model=False).closing() as rt:
            report = rt.control("context", {}, surface="cli").receipt.observations["report"]
            tokens: int = report["tools"]
            return tokens

    without = tools_tokens()
    monkeypatch.setenv("COMAL_CONFIG", str(_config(tmp_path, {"plugins": [EXAMPLE]})))
    assert tools_tokens() > without


def test_the_model_has_no_operation_that_loads_a_plugin(mods: Path) -> None:
    # covers: PLG-1, CFG-2
    write_module(mods, EXAMPLE, example_source())
    enable_plugins([EXAMPLE])
    catalog = default_registry().catalog("model")
    for op in catalog.operations:
        text = json.dumps([op.name, op.description, op.parameters]).lower()
        assert "plugin" not in text, op.name
    assert "plugins" in OPERATOR_ONLY  # the configuration key is out of the model's reach
    # Only the configuration enables a module: no other code in comal calls the seam's enabler.
    callers = set()
    for path in (REPO / "src" / "comal").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and "enable_plugins" in ast.unparse(node.func):
                callers.add(path.relative_to(REPO / "src").as_posix())
    assert callers == {"comal/agent/_config.py"}


def test_a_plugin_that_fails_is_a_coded_error_naming_it(tmp_path: Path, mods: Path) -> None:
    # covers: PLG-1
    write_module(mods, "raises_at_import", "raise RuntimeError('no database here')\n")
    write_module(mods, "hook_raises", (
        "from comal.plugins import hookimpl\n\n@hookimpl\ndef comal_engines():\n"
        "    raise ValueError('boom')\n"
    ))  # fmt: skip
    write_module(mods, "wrong_type", (
        "from comal.plugins import hookimpl\n\n@hookimpl\ndef comal_providers():\n"
        "    return ['anthropic']\n"
    ))  # fmt: skip
    write_module(mods, "unmarked", "def comal_operations():\n    return []\n")
    write_module(mods, "typo", (
        "from comal.plugins import hookimpl\n\n@hookimpl\ndef comal_engine():\n    return []\n"
    ))  # fmt: skip
    cases = {
        "not_installed": (PluginLoadError, "ModuleNotFoundError"),
        "raises_at_import": (PluginLoadError, "no database here"),
        "hook_raises": (PluginHookError, "comal_engines() failed: ValueError: boom"),
        "wrong_type": (PluginHookError, "gave str, not a comal.providers.ProviderScheme"),
        "unmarked": (PluginLoadError, "without @comal.plugins.hookimpl"),
        "typo": (PluginLoadError, "comal_engine"),
    }
    for module, (error, words) in cases.items():
        config = tmp_path / f"{module}.json"
        config.write_text(json.dumps({"plugins": [module]}))
        with pytest.raises(error) as info:
            load_config(config)
        assert info.value.plugin == module and words in str(info.value), str(info.value)
        if module in ("not_installed", "raises_at_import"):
            assert f"named under plugins: in {config}" in str(info.value)
    # Nothing of a failed plugin stays registered.
    builtins = ["comal-providers", "comal-script", "comal-engines", "comal-jobs", "comal-web"]
    assert [p.name for p in plugin_infos()] == builtins
    # Through the real CLI: a message with the code, no traceback.
    env = os.environ | {"PYTHONPATH": str(mods), "COMAL_CONFIG": str(tmp_path / "typo.json")}
    run = cli("-p", "hi", "--model", "anthropic:claude-sonnet-4-6", env=env)
    assert run.returncode == 2 and "[PLUGIN_LOAD]" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr + run.stdout


def test_names_are_registered_once_and_nothing_is_replaced(mods: Path) -> None:
    # covers: PLG-1
    write_module(mods, "second_limit", (
        "from comal.context import LimitEngine\nfrom comal.plugins import hookimpl\n\n"
        "@hookimpl\ndef comal_engines():\n    return [LimitEngine()]\n"
    ))  # fmt: skip
    write_module(mods, "second_read", (
        "from comal.ops import native_operations\nfrom comal.plugins import hookimpl\n\n"
        "@hookimpl\ndef comal_operations():\n"
        "    return [o for o in native_operations() if o.name == 'Read']\n"
    ))  # fmt: skip
    limit = get_engine("limit")
    with pytest.raises(PluginConflict) as info:
        enable_plugins(["second_limit"])
    assert info.value.code == "PLUGIN_CONFLICT" and "plugin 'comal-engines'" in str(info.value)
    assert get_engine("limit") is limit
    enable_plugins(["second_read"])
    with pytest.raises(PluginConflict, match=r"second_read.*'Read' is already registered"):
        default_registry()


def test_model_specs_read_the_scheme_registry(mods: Path, tmp_path: Path) -> None:
    # covers: PLG-1, OUT-1
    assert list(provider_schemes()) == [
        "anthropic", "openai", "openai-responses", "openai-compat", "script",
    ]  # fmt: skip
    write_module(mods, EXAMPLE, example_source())
    enable_plugins([EXAMPLE, EXAMPLE])  # a module named twice is enabled once
    assert ModelSpec.parse("echo:any") == ModelSpec("echo", "any")
    with pytest.raises(ProviderConfigError) as info:
        ModelSpec.parse("gemini:flash")
    assert "script, echo" in str(info.value)
    with pytest.raises(InputError):
        load_config(_config(tmp_path, {"plugins": ["not a module name"]}))


def test_help_loads_no_plugin() -> None:
    # covers: PLG-1
    probe = (
        "import sys\nfrom comal.cli import main\ntry:\n    main(['--help'])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pluggy', 'comal.plugins._manager', 'importlib.metadata')"
        " if m in sys.modules), file=sys.stderr)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert run.stderr.strip().splitlines()[-1] == "[]"


def test_the_agent_no_longer_imports_the_fakes() -> None:
    # covers: PLG-1
    import comal.providers.script as script
    import comal.testing as testing

    assert testing.ScriptedProvider is script.ScriptedProvider
    assert testing.load_script is script.load_script
    for path in (REPO / "src" / "comal" / "agent").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert "testing" not in (node.module or ""), path.name
        assert "SCRIPT_PREFIX" not in path.read_text() or path.name == "__init__.py", path.name


def _config(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "conf.json"
    path.write_text(json.dumps(data))
    return path
