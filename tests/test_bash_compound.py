"""Compound Bash commands are judged part by part, and a decision names the part (issue 32 §5).

``--allow 'Bash(ls *)' --allow 'Bash(pwd)'`` must allow ``ls -a && pwd``; ``Bash(cat *)`` with
``Bash(python3 *)`` must allow ``cat a && python3 -c …``; a denied part denies the whole and is
named with its rule; what hides a command is still never allowed part by part.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _agent_support import reply, text, tool, write_script
from comal.ops import Decision, Policy, default_registry

BASH = default_registry().get("Bash")
assert BASH is not None


def _comal(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = cwd.parent / "config.json"  # Bash runs here even where there is no OS sandbox
    config.write_text(json.dumps({"sandbox": {"allow_unsandboxed": True}}))
    env = {**os.environ, "COMAL_CONFIG": str(config), "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "comal", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _receipts(run: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    data = json.loads(run.stdout.strip().splitlines()[-1])
    return {r["call_id"]: r for r in data["receipts"]}


def test_the_issues_compounds_through_comal_p(tmp_path: Path) -> None:
    # covers: DRV-5, OPS-7, OPS-3
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a").write_text("alpha\n")
    (ws / "keep").mkdir()
    script = write_script(
        tmp_path / "s.jsonl",
        [
            reply(tool("b1", "Bash", command="ls -a && pwd")),
            reply(tool("b2", "Bash", command="cat a && python3 -c 'print(6 * 7)'")),
            reply(tool("b3", "Bash", command="ls && rm -rf keep")),
            reply(tool("b4", "Bash", command="cat a; touch made.txt")),
            reply(tool("b5", "Bash", command="ls && echo $(touch hidden.txt)")),
            reply(tool("b6", "Bash", command="ls | cat > copied.txt")),
            reply(text("done")),
        ],
    )
    rules = ["--allow", "Bash(ls *)", "--allow", "Bash(pwd)", "--allow", "Bash(cat *)"]
    rules += ["--allow", "Bash(python3 *)", "--allow", "Bash(echo *)", "--deny", "Bash(rm *)"]
    db = str(tmp_path / "l.db")
    run = _comal(ws, "--ledger", db, "-p", "go", "--model", f"script:{script}", "--mode", "ask",
                 *rules, "--json")  # fmt: skip
    got = _receipts(run)
    ls_pwd, cat_py, rm, touch, hidden, redirect = (got[f"b{i}"] for i in range(1, 7))
    # Every part allowed, each by its own rule: the compound runs.
    assert (ls_pwd["status"], ls_pwd["judgment"]["decision"]) == ("ok", "allow"), ls_pwd
    assert ls_pwd["judgment"]["rule"] == "Bash(ls *) + Bash(pwd)"
    assert (cat_py["status"], cat_py["judgment"]["rule"]) == ("ok", "Bash(cat *) + Bash(python3 *)")
    assert "42" in run.stderr and str(ws) in run.stderr  # what both parts printed
    # A denied part denies the whole, and the denial names the part and the rule.
    assert (rm["status"], rm["judgment"]["rule"]) == ("denied", "Bash(rm *)")
    assert rm["judgment"]["part"] == {"index": 2, "of": 2, "text": "rm -rf keep"}
    assert 'denied by the rule Bash(rm *) on part 2 of 2, "rm -rf keep"' in rm["judgment"]["reason"]
    assert rm["label"] == 'deny by Bash(rm *) on part 2 of 2, "rm -rf keep"'
    assert (ws / "keep").is_dir()
    # A part no rule allows: asked, and headless that is a denial naming the part.
    assert (touch["status"], touch["judgment"]["rule"]) == ("denied", "mode:ask")
    reason = touch["judgment"]["reason"]
    assert reason.startswith('part 2 of 2, "touch made.txt", matches no allow rule'), reason
    assert "no approver is attached (headless)" in reason
    assert not (ws / "made.txt").exists()
    # What hides a command is never allowed part by part (the substitution runs `touch`).
    assert (hidden["status"], hidden["judgment"]["rule"]) == ("denied", "mode:ask")
    assert 'part 2 of 2, "echo $(touch hidden.txt)"' in hidden["judgment"]["reason"]
    assert "command substitution" in hidden["judgment"]["reason"]
    assert (redirect["status"], redirect["judgment"]["part"]["index"]) == ("denied", 2)
    assert "(redirect)" in redirect["judgment"]["reason"]
    assert not (ws / "hidden.txt").exists() and not (ws / "copied.txt").exists()
    # The progress line names the rules and the part, not "deny by mode:ask" alone.
    assert "Bash: ok (allow by Bash(ls *) + Bash(pwd))" in run.stderr
    assert 'Bash: denied (deny by Bash(rm *) on part 2 of 2, "rm -rf keep")' in run.stderr
    assert 'Bash: denied (deny by mode:ask on part 2 of 2, "touch made.txt")' in run.stderr
    # `comal receipts` reads the same labels.
    session = json.loads(run.stdout.strip().splitlines()[-1])["session"]
    table = _comal(ws, "--ledger", db, "receipts", session[:8]).stdout
    assert "allow by Bash(cat *) + Bash(python3 *)" in table
    assert 'deny by Bash(rm *) on part 2 of 2, "rm -rf keep"' in table


# Simple commands by what the rules below make of them.
ALLOW = ["Bash(ls *)", "Bash(pwd)", "Bash(cat *)", "Bash(python3 *)", "Bash(git status *)"]
DENY = ["Bash(rm *)", "Bash(git push *)"]
POLICY = Policy.from_config({"mode": "ask", "allow": ALLOW, "deny": DENY})
ALLOWED = ["ls -a", "ls", "pwd", "cat a.txt", "python3 -c 'print(1)'", "git status --short"]
ASKED = ["touch x", "curl example.com", "make", "lsof", "pwdx 1", "git commit -m wip"]
DENIED = ["rm -rf build", "rm x", "git push origin main", "git push"]
SEPARATORS = [" && ", " || ", "; ", " | ", " & ", "\n", " |& ", " ;\n "]
KIND = {**dict.fromkeys(ALLOWED, "allow"), **dict.fromkeys(ASKED, "ask")}
KIND |= dict.fromkeys(DENIED, "deny")


def decide(command: str) -> Decision:
    return POLICY.decide(BASH, None, "ask", subject=command)


@st.composite
def compounds(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A compound of 1-5 simple commands joined by any separator, a run of them perhaps
    grouped in a subshell or braces or negated; (its text, its parts in order)."""
    parts = draw(st.lists(st.sampled_from(ALLOWED + ASKED + DENIED), min_size=1, max_size=5))
    pieces = list(parts)
    if len(pieces) > 1 and draw(st.booleans()):
        start = draw(st.integers(0, len(pieces) - 2))
        end = draw(st.integers(start + 1, len(pieces) - 1))
        inner = draw(st.sampled_from(SEPARATORS)).join(pieces[start : end + 1])
        forms = [f"( {inner} )", f"{{ {inner}; }}"]
        if start == 0:  # `!` starts a pipeline: never after a `|`
            forms.append(f"! {inner}")
        wrapped = draw(st.sampled_from(forms))
        pieces[start : end + 1] = [wrapped]
    text = pieces[0]
    for piece in pieces[1:]:
        text += draw(st.sampled_from(SEPARATORS)) + piece
    return text, parts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(compounds())
def test_a_compound_is_allowed_iff_every_part_is(compound: tuple[str, list[str]]) -> None:
    # covers: DRV-5, OPS-7
    command, parts = compound
    kinds = [KIND[p] for p in parts]
    decision = decide(command)
    alone = [decide(p).action for p in parts]
    assert alone == kinds  # each part on its own is what the rules make of it
    if "deny" in kinds:
        assert decision.action == "deny" and decision.rule in DENY, (command, decision)
        if len(parts) > 1:  # the part named is one the rule denies on its own
            assert decision.part is not None and KIND[decision.part.text] == "deny"
            assert decide(decision.part.text).rule == decision.rule
    elif "ask" in kinds:
        assert (decision.action, decision.rule) == ("ask", "mode:ask"), (command, decision)
        if len(parts) > 1:
            assert decision.part is not None and decision.part.text == parts[kinds.index("ask")]
    else:
        assert decision.action == "allow", (command, decision)
        assert set(decision.rule.split(" + ")) <= set(ALLOW)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(ALLOWED),
    st.sampled_from(SEPARATORS),
    st.sampled_from(ALLOWED + ASKED + DENIED),
    st.sampled_from(SEPARATORS),
    st.sampled_from(DENIED + ASKED),
    st.sampled_from(['"', "'"]),
)
def test_a_quoted_separator_never_splits(
    before: str, sep: str, first: str, inner: str, second: str, quote: str
) -> None:
    # covers: DRV-5
    quoted = f"{first}{inner}{second}"
    if quote == "'":
        quoted = quoted.replace("'", "")
    command = f"{before}{sep}echo {quote}{quoted}{quote}"
    policy = Policy.from_config({"mode": "ask", "allow": [*ALLOW, "Bash(echo *)"], "deny": DENY})
    decision = policy.decide(BASH, None, "ask", subject=command)
    # Two parts: the allowed command, and `echo` with one argument however many separators
    # that argument holds; nothing inside the quotes is a command to deny or ask about.
    assert decision.action == "allow", (command, decision)
    assert decision.rule.endswith(" + Bash(echo *)"), (command, decision)


def test_what_hides_a_command_is_refused_part_by_part() -> None:
    # covers: DRV-5, OPS-7, CFG-2
    policy = Policy.from_config(
        {"mode": "ask", "allow": ["Bash(ls *)", "Bash(echo *)", "Bash(cat *)"]}
    )
    for command in (
        "ls && echo $(rm -rf x)",
        "ls && echo `id`",
        "ls; echo x > ~/.config/comal/config.json",
        "ls && cat <(curl evil)",
        "ls | env sh",
        "ls; bash -c 'ls'",
        "ls && echo $((",  # unreadable: one opaque command
        "{ echo x; } > ~/.config/comal/config.json",  # a group's redirect is the group's
        "(ls) > listing.txt",
        "for f in a; do echo $f; done >> out.txt",
    ):
        decision = policy.decide(BASH, None, "ask", subject=command)
        assert (decision.action, decision.rule) == ("ask", "mode:ask"), command
    # Duplicating a descriptor or writing to /dev/null hides nothing.
    for command in ("ls -a 2>&1 | cat", "ls >/dev/null 2>&1 && echo ok", "cat a 2>/dev/null"):
        decision = policy.decide(BASH, None, "ask", subject=command)
        assert decision.action == "allow", (command, decision)
    # A whole-command rule with no wildcard (what "always" writes) allows exactly that command.
    exact = Policy.from_config({"mode": "ask", "allow": ["Bash(ls -a && pwd)"]})
    assert exact.decide(BASH, None, "ask", subject="ls -a && pwd").action == "allow"
    assert exact.decide(BASH, None, "ask", subject="ls -a && pwd; id").action == "ask"


def test_claude_code_pattern_spellings() -> None:
    # covers: DRV-5
    policy = Policy.from_config(
        {"mode": "ask", "allow": ["Bash(ls *)", "Bash(npm run:*)"], "deny": ["Bash(git push *)"]}
    )
    verdicts = {
        c: policy.decide(BASH, None, "ask", subject=c).action
        for c in ("ls", "ls -la", "lsof", "npm run test", "npm run", "npm runx", "git push")
    }
    assert verdicts == {
        "ls": "allow",  # a trailing " *" may match nothing
        "ls -la": "allow",
        "lsof": "ask",  # ... but never another word
        "npm run test": "allow",  # "prefix:*" is "prefix *"
        "npm run": "allow",
        "npm runx": "ask",
        "git push": "deny",  # a deny rule's trailing " *" too
    }
