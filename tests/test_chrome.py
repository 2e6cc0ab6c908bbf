"""The governed browser in real headless Chromium (Debian's), offline: a scripted model drives
the comal.chrome plugin against a small loopback site, a deploy target and a publish target
that counts publishes (WEB-1, PLG-1, LIM-6)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _agent_support import reply, text, tool
from _chrome_support import World, task_script, workspace, world, write_json, write_script
from comal.agent import Flags
from comal.cli import _common
from comal.cli._agent import run_prompt
from comal.ledger import open_ledger
from comal.ops import receipts
from comal.plugins import reset_plugins

pytest.importorskip(
    "playwright",
    reason="playwright is not installed: the chrome extra (make installs it)",
)
pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists(),
    reason="Debian's chromium is not installed (apt-get install chromium; .ci/run does)",
)


@pytest.fixture(autouse=True)
def _fresh_plugins() -> Iterator[None]:
    # The plugin manager is the process's: each test enables what its configuration names.
    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.db"
    monkeypatch.setattr(_common.STATE, "ledger_path", str(path))
    return path


def run(
    w: World, tmp: Path, script: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, **cfg: Any
) -> tuple[int, list[Any], dict[str, str]]:
    ws = tmp / "ws" if (tmp / "ws").exists() else workspace(tmp)
    allow = cfg.pop("allow", ["ChromePublish"])
    config = w.settings(**cfg.pop("chrome", {})) | {"allow": allow} | cfg
    monkeypatch.setenv("COMAL_CONFIG", str(write_json(tmp / "config.json", config)))
    path = write_script(tmp / "task.jsonl", script)
    flags = Flags(model=f"script:{path}", mode="trusted", workspace=ws)
    code = run_prompt("Do the browser task.", flags, resume=None, as_json=True)
    led = open_ledger(_common.STATE.ledger_path)
    try:
        scope = led.sessions()[-1].scope
        found = receipts(led, scope)
        results = {
            r.tool_result.call_id: r.tool_result.text if isinstance(r.tool_result.text, str) else ""
            for e in led.entries(scope)
            for r in [e.message]
            if r.tool_result is not None
        }
    finally:
        led.close()
    return code, found, results


# covers: WEB-1, PLG-1
def test_open_fill_click_deploy_publish_finish(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world(tmp_path) as w:
        code, found, results = run(w, tmp_path, task_script(w.site), monkeypatch)
        by_op = {r.operation: r for r in found}
        assert code == 0, results
        assert w.site_counts.clicks == 1
        assert [p for p in w.target.publishes] == [by_op["ChromePublish"].observations["digest"]]
        assert by_op["ChromePublish"].observations["identity"] == w.target.digest()
        for op in ("ChromeFill", "ChromeClick"):
            seen = by_op[op].observations
            assert seen["before"].startswith("sha256:") and seen["after"] != seen["before"]
        assert by_op["ChromeDeploy"].observations["postcondition"] is True
        assert (w.deploy_dir / "current" / "index.html").read_text() == "<h1>Hello</h1>\n"
        assert by_op["ChromeFinish"].status == "ok"
        # The operator's test ran as the operator, the task's own check as the model's call.
        bash = {r.call_id: r.actor.kind for r in found if r.operation == "Bash"}
        assert bash == {"check-finish1-0": "operator", "check-finish1-task-0": "user"}
        assert w.evil_counts.hits == []


# covers: WEB-1, LIM-6
def test_origins_hold_for_direct_redirect_iframe_popup_and_fetch(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world(tmp_path) as w:
        script = [
            reply(tool("direct", "ChromeOpen", url=f"{w.evil}/direct")),
            reply(tool("redir", "ChromeOpen", url=f"{w.site}/redir")),
            reply(tool("redirok", "ChromeOpen", url=f"{w.site}/redir-ok")),
            reply(tool("chain", "ChromeOpen", url=f"{w.site}/redir-page")),
            reply(tool("frame", "ChromeOpen", url=f"{w.site}/frame")),
            reply(tool("fetch", "ChromeOpen", url=f"{w.site}/fetcher")),
            reply(tool("snap", "ChromeSnapshot")),
            reply(tool("socket", "ChromeOpen", url=f"{w.site}/socket")),
            reply(tool("popup", "ChromeOpen", url=f"{w.site}/popup")),
            reply(tool("pop", "ChromeClick", selector="#pop")),
            reply(text("Looked."), tool("fin", "ChromeFinish")),
            reply(text("Done.")),
        ]
        code, found, results = run(w, tmp_path, script, monkeypatch)
        by_call = {r.call_id: r for r in found}
        assert code == 0, results
        # Nothing ever reached the other origin, whatever the way the page tried.
        assert w.evil_counts.hits == []
        assert by_call["direct"].status == "error"
        assert by_call["direct"].observations["error"] == "CHROME_ORIGIN"
        assert by_call["redir"].status == "error" and "redirect" in results["redir"]
        assert by_call["redirok"].observations["final_url"] == f"{w.site}/page"
        refused = {
            call: [r["url"] for r in by_call[call].observations["refused"]]
            for call in ("chain", "frame", "fetch", "pop", "socket")
        }
        assert refused["chain"] == [f"{w.evil}/img"]
        assert f"{w.evil}/framed" in refused["frame"]
        assert f"{w.evil}/data" in refused["fetch"]
        assert f"{w.evil}/popped" in refused["pop"]
        assert f"{w.evil.replace('http', 'ws')}/sock" in refused["socket"]
        # LIM-6: the screenshot is evidence by digest; the text says its pixels were not seen.
        snap = results["snap"]
        assert "refused" in snap and "its pixels are not in this result" in snap
        assert by_call["snap"].observations["screenshot"].startswith("sha256:")


# covers: PLG-1
def test_the_model_cannot_reach_the_plugin_or_its_settings(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world(tmp_path) as w:
        # Without the operator's plugins: the model's catalog has no browser at all.
        config = {"plugin_settings": {}}
        monkeypatch.setenv("COMAL_CONFIG", str(write_json(tmp_path / "c.json", config)))
        script = [reply(tool("o", "ChromeOpen", url=f"{w.site}/start")), reply(text("no."))]
        path = write_script(tmp_path / "t.jsonl", script)
        flags = Flags(model=f"script:{path}", mode="trusted", workspace=workspace(tmp_path))
        run_prompt("go", flags, resume=None, as_json=True)
        led = open_ledger(_common.STATE.ledger_path)
        try:
            scope = led.sessions()[-1].scope
            (r,) = receipts(led, scope)
        finally:
            led.close()
        assert r.status == "denied" and w.site_counts.hits == []


# covers: WEB-1, WEB-2, PLG-2
def test_publish_to_a_git_remote_and_observe_its_identity(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from comal.chrome._recover import recover_publish
    from comal.ops import RecoveryContext

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    with world(tmp_path) as w:
        script = [
            reply(tool("pub", "ChromePublish")),
            reply(tool("pub2", "ChromePublish")),  # the same files again: not pushed again
            reply(text("Published."), tool("fin", "ChromeFinish")),
            reply(text("Done.")),
        ]
        publish = {"kind": "git", "remote": str(remote), "ref": "refs/heads/site"}
        code, found, results = run(w, tmp_path, script, monkeypatch, chrome={"publish": publish})
        assert code == 0, results
        head = subprocess.run(
            ["git", "-C", str(remote), "rev-parse", "refs/heads/site"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        by_call = {r.call_id: r for r in found}
        assert by_call["pub"].observations["identity"] == head  # one commit, not two
        again = by_call["pub2"].observations
        assert again["identity"] == head and again["already_published"]["call_id"] == "pub"
        parents = subprocess.run(
            ["git", "-C", str(remote), "rev-list", "--count", "refs/heads/site"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert parents == "1"
        shown = subprocess.run(
            ["git", "-C", str(remote), "show", f"{head}:index.html"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert shown == "<h1>Hello</h1>\n"
        # A fresh observation of the recorded intent finds the intended commit.
        led = open_ledger(db)
        try:
            scope = led.sessions()[-1].scope
            prep = next(p for p in led.records(scope, "preparation") if p.body["call_id"] == "pub2")
            ctx = RecoveryContext(led, scope, None, "pub2", prep.id, prep.body)
            seen = recover_publish(prep.body["intent"], ctx)
        finally:
            led.close()
        assert seen.status == "postcondition_observed"


# covers: WEB-2, PLG-2
def test_the_same_artifact_is_published_once_and_a_changed_one_again(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 30, item 6: three publishes of one artifact were three PUTs.
    with world(tmp_path) as w:
        script = [
            reply(tool("pub1", "ChromePublish")),
            reply(tool("pub2", "ChromePublish")),
            reply(tool("pub3", "ChromePublish")),
            reply(tool("edit", "Write", path="dist/index.html", content="<h1>Hello again</h1>\n")),
            reply(tool("pub4", "ChromePublish")),
            reply(text("Published."), tool("fin", "ChromeFinish")),
            reply(text("Done.")),
        ]
        code, found, results = run(w, tmp_path, script, monkeypatch)
        assert code == 0, results
        by_call = {r.call_id: r for r in found}
        first, changed = by_call["pub1"].observations, by_call["pub4"].observations
        assert w.target.puts == 2 and w.target.publishes == [first["digest"], changed["digest"]]
        assert first["digest"] != changed["digest"] and "already_published" not in changed
        for again in ("pub2", "pub3"):
            receipt = by_call[again]
            assert receipt.status == "ok" and receipt.observations["postcondition"] is True
            said = receipt.observations["already_published"]
            assert (said["call_id"], said["receipt"]) == ("pub1", by_call["pub1"].record_id)
            assert receipt.observations["identity"] == first["identity"]
            assert results[again].startswith(f"already published {first['digest']}")
        assert w.target.digest() == changed["identity"]


# covers: WEB-1, WEB-3
def test_the_task_is_not_finished_until_chromefinish_tests_pass(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world(tmp_path) as w:
        script = [
            reply(tool("open", "ChromeOpen", url=f"{w.site}/start")),
            reply(tool("click", "ChromeClick", selector="#go")),
            reply(text("Clicked, done.")),  # no ChromeFinish: the house's finish refuses
            reply(tool("fin", "ChromeFinish")),  # the task's test fails
            reply(text("Cannot finish.")),
        ]
        code, found, results = run(
            w, tmp_path, script, monkeypatch, chrome={"tests": ["test -f missing.txt"]}
        )
        assert code != 0 or found
        finishes = [r for r in found if r.operation == "finish_call"]
        assert finishes and finishes[0].status == "error"
        assert "call ChromeFinish" in str(finishes[0].observations.get("gates"))
        fin = next(r for r in found if r.call_id == "fin")
        assert fin.status == "error" and "tests failed" in results["fin"]
        led = open_ledger(db)
        try:
            info = led.session(led.sessions()[-1].scope)
        finally:
            led.close()
        assert info is not None and info.status != "finished"


# covers: WEB-1, PLG-1
def test_publish_is_asked_even_in_trusted_mode_unless_a_rule_names_it(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world(tmp_path) as w:
        script = [reply(tool("pub", "ChromePublish")), reply(text("Not published."))]
        _, found, _ = run(w, tmp_path, script, monkeypatch, allow=[])
        (pub,) = [r for r in found if r.call_id == "pub"]
        assert pub.status == "denied" and pub.judgment["rule"] == "operation:ChromePublish"
        assert w.target.publishes == [] and w.target.reads == 0


# covers: WEB-1, WEB-2
def test_recover_reads_downloads_and_coded_errors(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world(tmp_path) as w:
        script = [
            reply(tool("open", "ChromeOpen", url=f"{w.site}/start")),
            reply(tool("missing", "ChromeClick", selector="#nothing-here")),
            reply(tool("pub", "ChromePublish")),
            reply(tool("rec", "ChromeRecover")),
            reply(text("Checked."), tool("fin", "ChromeFinish")),
            reply(text("Done.")),
        ]
        code, found, results = run(w, tmp_path, script, monkeypatch, chrome={"timeout": 3})
        by_call = {r.call_id: r for r in found}
        assert code == 0, results
        assert by_call["missing"].status == "error"
        assert by_call["missing"].observations["error"] == "CHROME_PAGE"
        (read,) = by_call["rec"].observations["reads"]
        assert read["verdict"] == "match" and read["identity"] == w.target.digest()
        # The publish recorded the page it was decided on, as evidence.
        led = open_ledger(db)
        try:
            scope = led.sessions()[-1].scope
            prep = next(p for p in led.records(scope, "preparation") if p.body["call_id"] == "pub")
        finally:
            led.close()
        assert prep.body["intent"]["snapshot"]["url"] == f"{w.site}/start"


# covers: PLG-1
def test_the_settings_section_is_checked_when_the_configuration_is_read(tmp_path: Path) -> None:
    from comal.agent import load_config
    from comal.errors import InputError

    cases = [
        ({"chrome": {"origins": ["ftp://nowhere"]}}, "plugin_settings.chrome.origins"),
        ({"chrome": {"deploy": {"url": "http://x/", "dir": "rel"}}},
         "plugin_settings.chrome.deploy.dir"),
        ({"chrome": {"colour": "red"}}, "plugin_settings.chrome.colour"),
        ({"chorme": {}}, "plugin_settings.chorme"),
    ]  # fmt: skip
    for section, field in cases:
        path = write_json(
            tmp_path / "c.json", {"plugins": ["comal.chrome"], "plugin_settings": section}
        )
        with pytest.raises(InputError) as caught:
            load_config(path)
        assert caught.value.field == field, (section, caught.value)
    # Without the plugin enabled, nothing reads the section: refused too.
    reset_plugins()
    path = write_json(tmp_path / "c.json", {"plugin_settings": {"chrome": {}}})
    with pytest.raises(InputError, match="no enabled plugin reads"):
        load_config(path)


# covers: WEB-1
def test_downloads_land_in_the_workspace_only(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world(tmp_path) as w:
        script = [
            reply(tool("open", "ChromeOpen", url=f"{w.site}/download")),
            reply(tool("get", "ChromeClick", selector="#dl")),
            reply(text("Got it."), tool("fin", "ChromeFinish")),
            reply(text("Done.")),
        ]
        code, _, results = run(w, tmp_path, script, monkeypatch)
        assert code == 0, results
        # The name the page suggested climbs out; it is kept as one name, in the workspace.
        where = tmp_path / "ws" / "downloads"
        for _ in range(50):
            if where.exists() and list(where.iterdir()):
                break
            time.sleep(0.1)
        (saved,) = list(where.iterdir())
        assert saved.read_text() == "report" and "/" not in saved.name
        assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "ws" / "evil.txt").exists()
