"""What a person's prompt becomes in the session: the preamble (CCH-1) and the prompt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ..messages import Message, Role, Text, preamble_text
from ._settings import AgentSettings

__all__ = ["Preamble", "intention", "prompt_of", "utc_now"]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Preamble:
    """CCH-1's dynamic zone: what changes from one prompt to the next, sent as the first part
    of the prompt's user message and never in the system prompt, so the cached prefix (tools,
    system, history) stays byte-identical across turns, days and sessions.

    ``when`` is the time of the prompt; ``workspace`` the directory the agent works in;
    ``sender`` who wrote it and ``channel`` the surface it came through; ``memory`` retrieved
    memory and ``skills`` active skills an embedding application adds (one text each). The
    preamble is stored with the prompt, so later requests resend it unchanged."""

    when: datetime
    workspace: object | None = None
    sender: str | None = None
    channel: str | None = None
    memory: Sequence[str] = ()
    skills: Sequence[str] = ()

    def render(self) -> str:
        when = self.when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        root = self.workspace if self.workspace is not None else "(none)"
        lines = [f"date: {when}", f"workspace: {root}"]
        if self.sender:
            lines.append(f"sender: {self.sender}")
        if self.channel:
            lines.append(f"channel: {self.channel}")
        for title, items in (("memory", self.memory), ("skills", self.skills)):
            if items:
                lines.append(f"{title}:")
                lines += [f"- {item}" for item in items]
        return preamble_text(lines)


def intention(
    prompt: str,
    settings: AgentSettings,
    workspace: object | None = None,
    *,
    preamble: Preamble | None = None,
) -> Message:
    """The user message a prompt becomes: the preamble (CCH-1; by default the current time
    and ``workspace``), then the prompt, unless ``settings.preamble`` is off."""
    if not settings.preamble:
        return Message(Role.USER, (Text(prompt),))
    if preamble is None:
        preamble = Preamble(utc_now(), workspace)
    return Message(Role.USER, (Text(preamble.render()), Text(prompt)))


def prompt_of(message: Message) -> str:
    """The prompt a user message carries (its last text part: the preamble comes first)."""
    texts = [p.text for p in message.parts if isinstance(p, Text)]
    return texts[-1] if texts else ""
