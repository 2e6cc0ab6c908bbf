"""The one turn service: every surface reaches the engines through it, and the disagreements its
copies had are gone (the proxy's threshold, a queued ``/compact``'s summarizer, the request
records' fields).

# covers: SRF-2, OBS-1
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _agent_support import MODEL, reply, rig, settings_for, text, tool
from comal.compaction import SUMMARIZER_SYSTEM
from comal.context import ENGINES, Engine, get_engine
from comal.context.dag import DagConfig
from comal.ledger import open_ledger
from comal.providers import ModelRequest
from comal.serve import ServeConfig, create_app
from comal.serve._run import ServerThread
from comal.testing import FunctionProvider, ScriptedProvider
from comal.tokens import EstimatingCounter

SRC = Path(__file__).resolve().parents[1] / "src" / "comal"
SERVICE = ("comal.turns",)


def _engine_calls(path: Path) -> Iterator[tuple[int, str]]:
    """Calls shaped like the engine seam's: ``x.assemble(view, budget, config, ...)`` or
    ``x.plan(view, budget, config, ...)`` — the service's own methods take no configuration
    (it holds the validated one), so a call that passes one bypasses it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"assemble", "plan"}
            and (len(node.args) >= 3 or any(k.arg == "cache" for k in node.keywords))
        ):
            yield node.lineno, ast.unparse(node.func)


def test_no_module_outside_the_service_calls_an_engine() -> None:
    # covers: SRF-2
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(("turns/", "context/")):
            continue  # the service, and the engines themselves
        for line, call in _engine_calls(path):
            offenders.append(f"{rel}:{line} {call}(...)")
    assert offenders == []


def test_the_walk_would_see_a_direct_call(tmp_path: Path) -> None:
    # The walk above is not vacuous: a surface written the old way is caught.
    copy = tmp_path / "surface.py"
    copy.write_text(
        "def turn(engine, view, budget, config):\n    engine.assemble(view, budget, config)\n"
    )
    assert list(_engine_calls(copy)) == [(2, "engine.assemble")]


# The turn's steps a surface could order itself, and what writes a request record.
_STEPS = frozenset({"assemble", "maintain", "commit", "meta", "plan"})
_RECORDERS = frozenset({"record_request", "UsageInput"})
# Who may build a request record without a turn: the ledger itself, transcripts' own usage
# (importers), and the ledger bench's synthetic rows (no engine is in it).
_RECORDS_ALLOWED = ("turns/", "ledger/", "importers/", "bench/_turn.py")


def _turn_steps(path: Path) -> Iterator[tuple[int, str]]:
    """Calls of a turn service's steps (``service.assemble(...)``, ``x.service.maintain(...)``)
    and of the request-record writers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _STEPS:
            owner = func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name == "service":
                yield node.lineno, ast.unparse(func)
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called in _RECORDERS:
            yield node.lineno, called


def test_no_surface_orders_the_turn_or_writes_a_request_record_itself() -> None:
    # covers: SRF-2, OBS-1
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(("turns/", "context/", "compaction/")):
            continue
        for line, call in _turn_steps(path):
            if call in _RECORDERS and rel.startswith(_RECORDS_ALLOWED):
                continue
            offenders.append(f"{rel}:{line} {call}(...)")
    assert offenders == []


def test_the_step_walk_would_see_a_surface_written_the_old_way(tmp_path: Path) -> None:
    copy = tmp_path / "surface.py"
    copy.write_text(
        "def turn(self, budget):\n"
        "    view = self.service.view()\n"
        "    self.service.maintain(budget)\n"
        "    a = self.service.assemble(view, budget)\n"
        "    self.ledger.record_request(self.scope, None, UsageInput(u))\n"
    )
    assert [c for _, c in _turn_steps(copy)] == [
        "self.service.maintain",
        "self.service.assemble",
        "record_request",
        "UsageInput",
    ]


@pytest.fixture
def callers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every engine's ``assemble`` and ``plan`` wrapped to note the module that called it."""
    seen: list[tuple[str, str]] = []
    for engine in ENGINES.values():
        cls = type(engine)
        for name in ("assemble", "plan"):
            original = getattr(cls, name)

            def spy(self: Engine, *a: Any, _o: Any = original, _n: str = name, **k: Any) -> Any:
                seen.append((_n, sys._getframe(1).f_globals["__name__"]))
                return _o(self, *a, **k)

            monkeypatch.setattr(cls, name, spy)
    return seen


def _outside(seen: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(n, m) for n, m in seen if not m.startswith((*SERVICE, "comal.context"))]


def test_the_agent_and_compact_reach_the_engine_through_the_service(
    tmp_path: Path, callers: list[tuple[str, str]]
) -> None:
    # covers: SRF-2, LIM-7
    r = rig(tmp_path)
    for engine in ("limit", "dag", "pipeline"):
        config = get_engine(engine).config_type.model_validate({"counter": EstimatingCounter()})
        settings = settings_for(engine=config, engine_name=engine, context_window=8_000)
        steps = [reply(tool(f"{engine}{i}", "Bash", command=f"echo {i}")) for i in range(4)]
        agent = r.agent(ScriptedProvider([*steps, reply(text("done"))]), settings=settings)
        agent.request_compact()
        agent.run(f"go {engine}")
        agent.proposer.service.drain(30)
    assert {m for _, m in callers} and _outside(callers) == []
    assert {n for n, _ in callers} == {"assemble", "plan"}


def test_replay_bench_and_proxy_reach_the_engine_through_the_service(
    tmp_path: Path, callers: list[tuple[str, str]]
) -> None:
    # covers: SRF-2
    from comal.bench._context import run_context_bench
    from comal.turns import replay

    for engine in ("limit", "dag"):
        run_context_bench(entries=300, window=16_000, measure=10, every=4, engine=engine,
                          workdir=tmp_path)  # fmt: skip
    led = open_ledger(tmp_path / "replay.db", counter=EstimatingCounter())
    scope = led.create_session("t", "a")
    r = rig(tmp_path, db=tmp_path / "replay.db", scope=scope)
    steps = [reply(tool(f"s{i}", "Bash", command=f"echo {i}")) for i in range(3)]
    r.agent(ScriptedProvider([*steps, reply(text("ok"))])).run("go")
    entries = list(led.iter_entries(scope))
    budget = settings_for().window
    from comal.tokens import Budget

    for engine in ("limit", "dag", "pipeline"):
        list(replay(entries, scope.session, Budget.for_window(budget.window, system_tokens=0,
                    tools_tokens=0), engine=engine))  # fmt: skip
    with _proxy(tmp_path, [{"content": "hello"}], engine="dag") as url:
        body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        assert httpx.post(url + "/v1/messages", json=body).status_code == 200
    assert {m for _, m in callers} and _outside(callers) == []


class _proxy:
    def __init__(self, tmp_path: Path, script: list[Any], **settings: Any) -> None:
        from comal.testing import FakeServer

        self.fake = FakeServer(script)
        self.tmp_path, self.settings = tmp_path, settings

    def __enter__(self) -> str:
        fake = self.fake.__enter__()
        self.led = open_ledger(self.tmp_path / "proxy.db")
        config = ServeConfig(
            upstream_anthropic=fake.anthropic_base_url,
            upstream_openai=fake.openai_base_url,
            **self.settings,
        )
        self.server = ServerThread(create_app(config, ledger=self.led)).__enter__()
        return self.server.url

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)
        self.led.close()
        self.fake.__exit__(*exc)


def test_the_proxy_budget_uses_the_engines_threshold(tmp_path: Path) -> None:
    # covers: TOK-4, SRF-2 (the proxy's copy of the budget ignored threshold_ratio)
    with _proxy(tmp_path, [{"content": "hello"}], engine="dag") as url:
        body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        sid = httpx.post(url + "/v1/messages", json=body).headers["x-comal-session"]
        (turn,) = httpx.get(f"{url}/api/sessions/{sid}/turns").json()["turns"]
    led = open_ledger(tmp_path / "proxy.db")
    (record,) = led.requests(led.resolve(sid))
    led.close()
    ratio = DagConfig().context_threshold
    assert ratio != 0.9  # the Budget default the proxy used to apply
    assert record.meta["threshold"] == int(ratio * record.meta["input_limit"])
    assert turn["stage"] is not None


def test_a_queued_compact_uses_the_configured_summarizer(tmp_path: Path) -> None:
    # covers: LIM-7, DAG-3 (a queued /compact ran the extractive summarizer with defaults)
    r = rig(tmp_path)
    config = DagConfig(counter=EstimatingCounter(), summarizer="provider", defer_compaction=False)
    settings = settings_for(engine=config, engine_name="dag")
    summaries = []

    def answer(req: ModelRequest) -> dict[str, Any]:
        if req.system == SUMMARIZER_SYSTEM:
            summaries.append(req)
            return {"content": "The user ran echo several times.\nExpand for details about: output"}
        if len([m for m in req.messages if m.role.value == "assistant"]) < 12:
            n = len(req.messages)
            return reply(tool(f"b{n}", "Bash", command=f"echo {'word ' * 800} {n}"))
        return reply(text("done"))

    r.agent(FunctionProvider(answer), settings=settings).run("grow")
    assert r.ledger.summaries(r.scope) == [] and summaries == []  # nothing due on its own
    second = r.agent(FunctionProvider(answer), settings=settings)
    second.request_compact()
    second.run("once more")
    made = r.ledger.summaries(r.scope)
    assert made and summaries, "the queued /compact made no summary with the model"
    assert {s.summarizer for s in made} == {MODEL}


def test_agent_sessions_show_the_proxys_per_turn_fields(tmp_path: Path) -> None:
    # covers: OBS-1 (agent request records lacked the fields the dashboard's turn view reads)
    db = tmp_path / "shared.db"
    led = open_ledger(db, counter=EstimatingCounter())
    agent_scope = led.create_session("local", "agent")
    r = rig(tmp_path, db=db, scope=agent_scope)
    r.agent(ScriptedProvider([reply(tool("b", "Bash", command="true")), reply(text("ok"))])).run(
        "hi"
    )
    with FakeServerApp(tmp_path, db) as url:
        body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        proxied = httpx.post(url + "/v1/messages", json=body).headers["x-comal-session"]
        agent_turns = httpx.get(f"{url}/api/sessions/{agent_scope.session}/turns").json()["turns"]
        proxy_turns = httpx.get(f"{url}/api/sessions/{proxied}/turns").json()["turns"]
    fields = ("stage", "input_tokens", "session_tokens", "history_tokens", "fixed_tokens",
              "window", "sent_seqs", "metrics", "checkpoint_new")  # fmt: skip
    for turn in proxy_turns:
        assert all(turn[f] is not None for f in fields), turn
    assert len(agent_turns) == 2
    for turn in agent_turns:
        assert all(turn[f] is not None for f in fields), turn
        assert turn["metrics"]["tokensLoaded"] > 0
    led.close()


class FakeServerApp(_proxy):
    def __init__(self, tmp_path: Path, db: Path) -> None:
        super().__init__(tmp_path, [{"content": "hello"}])
        self.db = db

    def __enter__(self) -> str:
        fake = self.fake.__enter__()
        self.led = open_ledger(self.db)
        config = ServeConfig(upstream_anthropic=fake.anthropic_base_url)
        self.server = ServerThread(create_app(config, ledger=self.led)).__enter__()
        return self.server.url
