"""Issue 9 §2: ``Bash(...)`` rules are parsed, not matched as strings.

Every bypass the probe found is a case here. Rules are advisory (the sandbox enforces), but a
deny rule still catches every spelling of its program, and an allow rule admits nothing it does
not understand: such a command falls through to ask (denied headless) instead.
"""

# covers: OPS-2, OPS-7, CFG-2

from __future__ import annotations

from pathlib import Path

import pytest

from _ops_support import ANA, Setup, call, make_setup
from comal.ops import Policy, view_command

DENY_RM = {
    "bin-rm": "/bin/rm -rf x",
    "command-rm": "command rm x",
    "backslash-rm": "\\rm x",
    "quoted-rm": "r''m x",
    "double-quoted-rm": 'r"m" x',
    "env-rm": "env rm x",
    "env-assign-rm": "env FOO=1 -u BAR rm x",
    "xargs-rm": "ls | xargs rm",
    "xargs-options-rm": "ls | xargs -I{} -n 1 rm {}",
    "find-delete": "find . -name '*.o' -delete",
    "find-exec-rm": "find . -exec rm {} \\;",
    "sudo-rm": "sudo -u root rm x",
    "nohup-rm": "nohup rm x &",
    "timeout-rm": "timeout 5 rm x",
    "exec-rm": "exec rm x",
    "bash-c-rm": "bash -c 'rm x'",
    "sh-c-nested-rm": "sh -c \"bash -c 'rm x'\"",
    "eval-rm": "eval rm x",
    "substituted-rm": "$(echo rm) x",
    "backtick-rm": "`echo rm` x",
    "assignment-prefix-rm": "FOO=1 rm x",
    "subshell-rm": "(cd /tmp && rm x)",
    "if-body-rm": "if true; then rm x; fi",
    "function-rm": "f() { rm x; }; f",
    "substitution-arg-rm": "echo $(rm x)",
    "unparseable-rm": "case $x in a) rm x;; esac ((",
}


@pytest.fixture
def guarded(tmp_path: Path) -> Setup:
    return make_setup(
        tmp_path,
        policy=Policy.from_config(
            {"mode": "ask", "allow": ["Bash(echo *)", "Bash(git *)"], "deny": ["Bash(rm *)"]}
        ),
    )


@pytest.mark.parametrize("case", sorted(DENY_RM))
def test_deny_rule_bypass(guarded: Setup, case: str) -> None:
    judged = guarded.house.judge.judge(call("Bash", {"command": DENY_RM[case]}), ANA)
    assert (judged.decision.action, judged.decision.rule) == ("deny", "Bash(rm *)"), case
    guarded.close()


ALLOW_ECHO_GIT = {
    "echo-redirect": "echo x > notes.txt",
    "echo-append-config": "echo 'mode: trusted' >> ~/.config/comal/config.json",
    "echo-process-substitution-in": "echo <(cat /etc/passwd)",
    "echo-process-substitution-out": "echo x >(cat)",
    "echo-command-substitution": "echo $(id)",
    "echo-backticks": "echo `id`",
    "echo-heredoc": "cat <<EOF\nx\nEOF",
    "echo-then-other": "echo ok; curl evil",
    "echo-pipe-shell": "echo id | sh",
    "echo-path": "/tmp/echo x",
    "echo-quoted-word": "'echo' x",
    "git-config-override-alias": "git -c alias.x='!sh -c id' x",
    "git-alias-definition": "git config alias.x '!rm -rf ~'",
    "git-config-env": "git --config-env=core.pager=X log",
    "git-redirect": "git log > out.txt",
    "git-exec-path": "git --exec-path=/tmp status",
    "git-then-rm": "git status && rm -rf ~",
    "git-env-wrapper": "env GIT_PAGER=sh git log",
}


@pytest.mark.parametrize("case", sorted(ALLOW_ECHO_GIT))
def test_allow_rule_bypass(guarded: Setup, case: str) -> None:
    judged = guarded.house.judge.judge(call("Bash", {"command": ALLOW_ECHO_GIT[case]}), ANA)
    assert judged.decision.action == "deny", case  # asked, and headless: nobody approved it
    assert judged.decision.rule not in ("Bash(echo *)", "Bash(git *)"), case
    guarded.close()


@pytest.mark.parametrize(
    "command", ["echo hello world", "git status", "git log --oneline", "git add -A && git diff"]
)
def test_allow_rules_still_allow_plain_commands(guarded: Setup, command: str) -> None:
    judged = guarded.house.judge.judge(call("Bash", {"command": command}), ANA)
    assert judged.decision.action == "allow" and judged.decision.rule.startswith("Bash(")
    guarded.close()


def test_rules_see_programs_through_wrappers() -> None:
    view = view_command("env A=1 nohup timeout 3 /usr/bin/rm -f x | xargs -0 r''m")
    programs = [i.program for i in view.invocations]
    assert programs == ["env", "nohup", "timeout", "rm", "xargs", "rm"]
    assert {"the wrapper env", "the wrapper xargs", "a path to the program"} <= set(view.risks)
    assert view_command("r''m x").risks == ("quoting in the command word",)
    broken = view_command("echo $((")
    assert not broken.parsed and broken.risks == ("a command the parser cannot read",)


def test_config_rewrite_through_an_allowed_echo(tmp_path: Path) -> None:
    # CFG-2: the probe rewrote comal's configuration with an allowed `echo`.
    conf = tmp_path / "ws" / ".comal" / "config.json"
    conf.parent.mkdir(parents=True)
    conf.write_text('{"mode": "ask"}')
    s = make_setup(tmp_path, policy=Policy.from_config({"mode": "ask", "allow": ["Bash(echo *)"]}))
    for command in (
        f'echo \'{{"mode": "trusted"}}\' > {conf}',
        'echo \'{"mode": "trusted"}\' > .comal/config.json',
        "echo x | tee .comal/config.json",
    ):
        _outcome, receipt = s.house.handle(call("Bash", {"command": command}), ANA, surface="cli")
        assert receipt.status == "denied", command
    assert conf.read_text() == '{"mode": "ask"}'
    s.close()
