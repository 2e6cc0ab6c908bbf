"""Which format a file is, judged by its content (the file name only breaks ties).

Only the head of the file is read (1 MiB, parsed as far as it goes), so detection stays cheap
on 100 MB sessions and works on torn files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from comal.errors import ImportFormatError

from ._jsonio import sniff

_NAMES = (
    "claude-code",
    "claude-code-web",
    "swe-agent",
    "mini-swe-agent",
    "codex",
    "openhands",
    "openhands-resolver",
    "openai",
    "anthropic",
    "locomo",
)

_CLAUDE_TYPES = {
    "user",
    "assistant",
    "summary",
    "system",
    "file-history-snapshot",
    "progress",
    "queue-operation",
}
_CODEX_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
_ANTHROPIC_BLOCKS = {
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
}


def _messages_format(messages: list[Any], name: str) -> str:
    """OpenAI Chat, Anthropic, or mini-swe-agent v1, from a list of ``{role, content}``."""
    dicts = [m for m in messages if isinstance(m, dict)]
    if name.endswith(".traj.json") or any(
        m.get("role") == "user" and str(m.get("content", "")).startswith("<returncode>")
        for m in dicts
    ):
        return "mini-swe-agent"
    for m in dicts:
        if m.get("role") in ("system", "developer", "tool", "function") or any(
            k in m for k in ("tool_calls", "tool_call_id", "function_call")
        ):
            return "openai"
        content = m.get("content")
        if isinstance(content, list):
            kinds = {b.get("type") for b in content if isinstance(b, dict)}
            if kinds & _ANTHROPIC_BLOCKS:
                return "anthropic"
            if kinds & {"image_url", "input_audio", "file", "refusal"}:
                return "openai"
    # Plain text turns read the same in both shapes.
    return "openai"


def classify(value: Any, name: str) -> str | None:
    """The format a top-level value (maybe cut short) belongs to; ``name`` breaks ties."""
    if isinstance(value, list):
        first = next((v for v in value if isinstance(v, dict)), None)
        if first is None:
            return None
        if ("action" in first or "observation" in first) and ("source" in first or "id" in first):
            return "openhands"
        if "role" in first:
            return _messages_format(value, name)
        return None
    if not isinstance(value, dict):
        return None
    keys = set(value)
    if "loglines" in keys:
        return "claude-code-web"
    if ("speaker_a" in keys and "speaker_b" in keys) or ("conversation" in keys and "qa" in keys):
        return "locomo"
    if str(value.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return "mini-swe-agent"
    if "issue" in keys and keys & {"history", "issue_type"} and "instance_id" not in keys:
        # The resolver's ResolverOutput: the GitHub issue it worked on and its event history
        # (``issue_type`` comes first, for a head cut before a long ``git_patch`` ends).
        return "openhands-resolver"
    if "history" in keys:
        history = value["history"]
        first = history[0] if isinstance(history, list) and history else None
        if isinstance(first, dict) and ("action" in first or "observation" in first):
            return "openhands"
        if keys & {"instance_id", "instruction", "test_result"} and "trajectory" not in keys:
            return "openhands"
        return "swe-agent"
    if "trajectory" in keys and keys & {"info", "environment", "replay_config"}:
        return "swe-agent"
    if "payload" in keys and value.get("type") in _CODEX_TYPES:
        return "codex"
    if keys & {"sessionId", "parentUuid", "leafUuid"} or (
        value.get("type") in _CLAUDE_TYPES and keys & {"message", "uuid", "summary"}
    ):
        return "claude-code"
    if isinstance(value.get("messages"), list):
        if "info" in keys and (name.endswith(".traj.json") or "instance_id" in keys):
            return "mini-swe-agent"
        if "system" in keys:
            return "anthropic"
        return _messages_format(value["messages"], name)
    return None


def detect(path: Path) -> str:
    values = sniff(path)
    if not values:
        raise ImportFormatError(
            "empty, or not JSON or JSON Lines. Supported: agent transcripts from Claude Code, "
            "Codex, SWE-agent, mini-swe-agent and OpenHands (event streams, evaluation and "
            "resolver output), and OpenAI/Anthropic message lists",
            path=str(path),
        )
    for value in values:
        found = classify(value, str(path))
        if found is not None:
            return found
    seen = sorted(values[0])[:8] if isinstance(values[0], dict) else type(values[0]).__name__
    raise ImportFormatError(
        f"no known transcript format matches (top-level: {seen}). Pass --format if you "
        "know it; supported: " + ", ".join(_NAMES),
        path=str(path),
    )
