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
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from comal.agent import OPERATOR_ONLY, Flags, Runtime, load_config
from comal.context import get_engine
from comal.errors import InputError
from comal.ledger import SQLiteLedger
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, Workspace, default_registry, receipts
from comal.plugins import (
    PluginConflict,
    PluginHookError,
    PluginLoadError,
    enable_plugins,
    plugin_infos,
    reset_plugins,
)
from comal.plugins._manager import BUILTINS
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


@dataclass(frozen=True)
class Installed:
    """A Python environment (a real venv) with the brief plugin installed in its
    site-packages, as ``pip install`` leaves it; comal's own dependencies come from this
    test's environment through a ``.pth`` line, and comal from this checkout."""

    python: Path
    site: Path

    def run(self, code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
        full = {k: v for k, v in os.environ.items() if not k.startswith("COMAL_")}
        full |= {"PYTHONPATH": str(REPO / "src")} | env
        return subprocess.run(
            [str(self.python), "-c", code], cwd=cwd, env=full, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    def plugins(self, cwd: Path, **env: str) -> dict[str, dict[str, Any]]:
        run = self.run("from comal.cli import main; main(['plugins', '--json'])", cwd, **env)
        assert run.returncode == 0, run.stderr
        return {row["name"]: row for row in json.loads(run.stdout)}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    site = Path(purelib)
    deps = sysconfig.get_path("purelib")
    (site / "_comal_test_deps.pth").write_text(f"import site; site.addsitedir({deps!r})\n")
    entry_point_site(site)
    return Installed(python, site)


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
    assert [row["source"] for row in listed[:5]] == ["builtin"] * 5
    doctor = json.loads(cli("doctor", "--json", env=env).stdout)
    line = next(c for c in doctor if c["check"] == f"plugin {EXAMPLE}")
    assert line["ok"] and "WordCount" in line["detail"] and "echo" in line["detail"]
    tools = json.loads(cli("tools", "--json", env=env).stdout)
    assert "WordCount" in [t["name"] for t in tools]


def test_an_installed_entry_point_enables_a_plugin(installed: Installed, tmp_path: Path) -> None:
    # covers: PLG-1
    brief = installed.plugins(tmp_path)["brief"]
    assert brief["source"] == "entry point" and brief["version"] == "1.2" and brief["enabled"]
    assert (brief["engines"], brief["job_handlers"]) == (["brief"], ["NoteJob"])
    # The engine joins the read-only registry, the handler the flattened list.
    config = _config(tmp_path, {"engine": "brief"})
    probe = (
        "from comal.agent import load_config\n"
        "from comal.context import ENGINES, get_engine\n"
        "from comal.plugins import job_handlers\n"
        "assert get_engine('brief').name == 'brief'\n"
        "assert list(ENGINES)[:3] == ['limit', 'dag', 'pipeline']\n"
        "assert [h.kind for h in job_handlers() if h.kind == 'NoteJob'] == ['NoteJob']\n"
        f"assert load_config({str(config)!r}).engine == 'brief'\n"
        "try:\n    ENGINES['brief'] = get_engine('limit')\n"
        "except TypeError:\n    print('read-only')\n"
    )
    run = installed.run(probe, tmp_path)
    assert run.returncode == 0 and run.stdout.strip() == "read-only", run.stderr


def test_the_operator_enables_only_the_installed_plugins_the_configuration_lists(
    installed: Installed, tmp_path: Path
) -> None:
    # covers: PLG-1
    listed = _config(tmp_path, {"installed_plugins": "listed"})
    # By the configuration: listed, not enabled, never imported.
    rows = installed.plugins(tmp_path, COMAL_CONFIG=str(listed))
    assert (rows["brief"]["enabled"], rows["brief"]["engines"]) == (False, [])
    built = [r["enabled"] for r in rows.values() if r["source"] == "builtin"]
    assert built == [True] * len(BUILTINS)
    assert "brief_engine" not in installed.run(
        "import sys\nfrom comal.agent import load_config\nfrom comal.plugins import "
        "plugin_infos\nload_config()\nplugin_infos()\nprint(sorted(sys.modules))",
        tmp_path, COMAL_CONFIG=str(listed),
    ).stdout  # fmt: skip
    # By the environment, whatever the file says: the stricter of the two.
    rows = installed.plugins(tmp_path, COMAL_INSTALLED_PLUGINS="listed")
    assert rows["brief"]["enabled"] is False
    every = _config(tmp_path, {"installed_plugins": "all"})
    rows = installed.plugins(tmp_path, COMAL_INSTALLED_PLUGINS="listed", COMAL_CONFIG=str(every))
    assert rows["brief"]["enabled"] is False
    # Named under plugins: (by entry point name or module), it is enabled as the entry point.
    for name in ("brief", "brief_engine"):
        named = _config(tmp_path, {"installed_plugins": "listed", "plugins": [name]})
        rows = installed.plugins(tmp_path, COMAL_CONFIG=str(named))
        assert (rows["brief"]["enabled"], rows["brief"]["source"]) == (True, "entry point")
        assert rows["brief"]["engines"] == ["brief"] and "brief_engine" not in rows
    # A bad value of the variable is a coded error, not a silent "all".
    bad = installed.run(
        "from comal.cli import main; main(['plugins', '--json'])", tmp_path,
        COMAL_INSTALLED_PLUGINS="some",
    )  # fmt: skip
    assert bad.returncode == 2 and "COMAL_INSTALLED_PLUGINS" in bad.stdout, bad.stdout


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
        house = House.of(ledger, scope, registry, Policy.from_config(policy), workspace=ws)
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
    builtins = [
        "comal-providers", "comal-script", "comal-engines", "comal-dag-recall", "comal-jobs",
        "comal-wire", "comal-hooks", "comal-web",
    ]  # fmt: skip
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


def test_the_executor_table_is_built_once_per_plugin_set(mods: Path) -> None:
    # covers: PLG-1
    from comal.compaction import handler_table

    first = handler_table()
    assert handler_table() is first  # not rebuilt for every job looked up
    write_module(mods, "another_job", (
        "from dataclasses import dataclass\n"
        "from comal.compaction import JobHandler\nfrom comal.context import Job\n"
        "from comal.plugins import hookimpl\n\n"
        "@dataclass(frozen=True, slots=True)\nclass Ping(Job):\n    pass\n\n"
        "@hookimpl\ndef comal_job_handlers():\n"
        "    return [JobHandler(Ping, lambda run, job: None)]\n"
    ))  # fmt: skip
    enable_plugins(["another_job"])
    after = handler_table()
    assert after is not first and len(after) == len(first) + 1


def test_the_dags_recall_tools_come_from_its_plugin_not_the_native_list() -> None:
    # covers: PLG-1, DAG-7
    from comal.ops import native_operations

    recall = {"ctx_search", "ctx_inspect", "ctx_expand"}
    assert not recall & {op.name for op in native_operations()}
    by_plugin = {info.name: {op.name for op in info.operations} for info in plugin_infos()}
    assert by_plugin["comal-dag-recall"] == recall
    # The one registry every surface builds holds them, judged like the rest.
    assert recall <= {op.name for op in default_registry()}
