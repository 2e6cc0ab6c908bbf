"""What kind of tool produced a result, and which earlier result a later one supersedes.

Facts about one tool result are a pure function of the call that asked for it (name and
arguments) and the result itself: the family (file read, search, fetch, command, recall, other),
whether the call only read the world (Tier-0 may clear it), whether masking may touch it, and
the *key* that makes a later result supersede it (the same file read again, the same command
run again, the same URL fetched again, a newer image).

A shell command counts as a read only when every command in it is on a short list of reading
programs and nothing redirects, substitutes or backgrounds: ``shlex`` splits it, and anything
it cannot split is not a read. Unknown is never read-only.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from ...messages import Message, ToolCall, ToolResult
from .._render import media_in
from ._config import PipelineConfig

__all__ = ["ResultFacts", "command_is_read_only", "result_facts"]

# Programs whose output is all they do (with the flags checked below).
_READERS = frozenset(
    {"cat", "head", "tail", "ls", "ll", "grep", "egrep", "fgrep", "rg", "ag", "wc", "nl",
     "pwd", "tree", "file", "stat", "du", "df", "which", "whereis", "sort", "uniq", "cut",
     "less", "more", "diff", "cmp", "md5sum", "sha256sum", "echo", "printf", "true", "cd",
     "basename", "dirname", "realpath", "readlink", "env", "printenv", "date", "whoami",
     "id", "uname", "hostname", "jq", "column", "tr", "od", "xxd", "hexdump", "strings"}
)  # fmt: skip
_GIT_READS = frozenset(
    {"log", "show", "diff", "status", "grep", "blame", "branch", "rev-parse", "ls-files",
     "describe", "shortlog", "reflog", "tag"}
)  # fmt: skip
_SPECIAL = frozenset({"git", "sed", "find", "awk"})
_SEPARATORS = frozenset({";", "&&", "||", "|", "\n"})
_WRITES = frozenset({">", ">>", "&>", ">&", "<<", "<<<", "&", "|&"})
_REFUSE = ("`", "$(", "<(", ">", "<<")
_MAX_COMMAND = 2_000
_PATH_KEYS = ("file_path", "path", "filename", "file", "notebook_path", "target_file")
_COMMAND_KEYS = ("command", "cmd", "commands", "script")


def _simple_read(words: list[str]) -> bool:
    if not words:
        return True
    head = words[0].rsplit("/", 1)[-1]
    if head == "git":
        sub = next((w for w in words[1:] if not w.startswith("-")), "")
        return sub in _GIT_READS
    if head == "sed":
        return "-n" in words and not any(w.startswith("-i") for w in words)
    if head == "find":
        return not {"-exec", "-execdir", "-delete", "-ok", "-fprint"} & set(words)
    if head == "awk":
        return not any("system(" in w or ">" in w for w in words)
    return head in _READERS


def command_is_read_only(command: str) -> bool:
    """Whether the shell ``command`` only reads (conservatively; see the module docstring)."""
    # Cheap refusals first: shlex is slow on long scripts, and a redirect or substitution
    # anywhere (even quoted) is enough to call a command a possible write.
    if len(command) > _MAX_COMMAND or any(mark in command for mark in _REFUSE):
        return False
    first = command.split(None, 1)[0].rsplit("/", 1)[-1] if command.strip() else ""
    if first not in _READERS and first not in _SPECIAL:
        return False  # most commands are not reads: no need to split them
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
    except ValueError:
        return False
    words: list[str] = []
    for token in tokens:
        if token in _WRITES:
            return False
        if token in _SEPARATORS:
            if not _simple_read(words):
                return False
            words = []
            continue
        if set(token) <= set(";&|<>"):
            return False  # a run of operators shlex did not separate (e.g. ">|")
        words.append(token)
    return _simple_read(words)


@dataclass(frozen=True, slots=True)
class ResultFacts:
    """Facts of one tool result. ``key`` makes a later result with the same key supersede it;
    ``what`` names the object (path, command, URL) in a placeholder."""

    tool: str
    family: str  # read | search | fetch | command | recall | edit | other
    key: tuple[str, str] | None
    read_only: bool
    maskable: bool
    ephemeral: bool
    image: bool
    large_cap: bool
    what: str


def _arguments(call: ToolCall | None) -> dict[str, Any]:
    if call is None:
        return {}
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {"_raw": call.arguments}
    return value if isinstance(value, dict) else {"_raw": call.arguments}


def _first_str(args: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            # Codex sends ["bash", "-lc", "<script>"]; the script is what ran.
            if len(value) >= 3 and value[1] in ("-lc", "-c"):
                return str(value[-1])
            return " ".join(value)
    return None


def result_facts(message: Message, call: ToolCall | None, config: PipelineConfig) -> ResultFacts:
    """The facts of the tool result in ``message``, asked for by ``call`` (None if unknown)."""
    result = message.tool_result
    assert isinstance(result, ToolResult)
    tool = (call.name if call is not None else None) or result.name or "tool"
    name = tool.lower()
    args = _arguments(call)
    image = bool(media_in(message)) or name in config.image_tools
    family, key, read_only, what = "other", None, False, ""
    path = _first_str(args, _PATH_KEYS)
    if name in config.recall_tools:
        family = "recall"
    elif name in config.editor_tools:
        sub = args.get("command")
        if sub == "view" and path:
            family, key, read_only, what = "read", ("file", path), True, path
        else:
            family, what = "edit", path or ""
    elif name in config.read_tools:
        family, read_only, what = "read", True, path or ""
        key = ("file", path) if path else None
    elif name in config.search_tools:
        family, read_only = "search", True
        what = json.dumps(args, sort_keys=True, ensure_ascii=False) if args else ""
        key = ("search", f"{name} {what}") if args else None
    elif name in config.fetch_tools or name in {"web_search", "websearch"}:
        family, read_only = "fetch", True
        url = _first_str(args, ("url", "query", "q"))
        what = url or ""
        key = ("url", url) if url else None
    elif name in config.command_tools:
        family = "command"
        command = _first_str(args, _COMMAND_KEYS) or str(args.get("_raw", ""))
        what = command
        key = ("command", command) if command else None
        read_only = bool(command) and command_is_read_only(command)
    elif name in config.write_tools:
        family, what = "edit", path or ""
    if image and key is None:
        key = ("image", "")
    mcp = name.startswith("mcp__") or name.startswith("mcp_")
    return ResultFacts(
        tool=tool,
        family=family,
        key=key,
        read_only=read_only and family != "recall",
        # Masking never touches recall results or file reads (PIP-1).
        maskable=family not in ("recall", "read"),
        ephemeral=name in config.ephemeral_tools,
        image=image,
        large_cap=family == "read" or mcp,
        what=what,
    )
