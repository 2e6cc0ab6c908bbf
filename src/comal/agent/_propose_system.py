"""The system prompt a proposer sends (DRV-1): the agent's own prompt and its engine's clause,
then the instruction files (:mod:`._instructions`), read again before every request.

It stays byte-identical from one request to the next unless a file changed: then the requests
carry a new prefix, the change is an ``instructions`` event stored with the request that first
sends it, and the cache watch is told the system part changed on purpose (a ``cache_edit``,
never a ``cache_break``, CCH-1).
"""

from __future__ import annotations

from typing import Any

from ..ledger import LedgerBackend, Scope
from ..messages import Message, canonical_json, sha256_hex
from ..tokens import TokenCounter, count_message
from ..turns import ContextSession
from ._instructions import (
    InstructionFiles,
    Instructions,
    changed_files,
    nested_folders,
    recorded_instructions,
)

__all__ = ["SystemPrompt"]


class SystemPrompt:
    """The part of :class:`~comal.agent.Proposer` that makes its system prompt."""

    ledger: LedgerBackend
    scope: Scope
    files: InstructionFiles | None
    service: ContextSession
    base_system: str
    instructions: Instructions
    system_text: str
    system_message: Message
    system_tokens: int
    _counter: TokenCounter
    _engine_json: dict[str, Any]
    _config: str
    _recorded: str
    _instructions_change: str | None

    def _start_system(self, base: str) -> None:
        """The first request's system prompt, and what the session recorded before it."""
        self.base_system = base
        recorded = recorded_instructions(self.ledger, self.scope)
        latest = recorded[-1][1] if recorded else Instructions()
        # What the session last recorded: a request whose instructions differ records anew.
        self._recorded = latest.digest
        if self.files is not None:
            self.files.load(nested_folders(latest))
        self.instructions = self.files.read() if self.files is not None else Instructions()
        # A prefix that differs from the previous request's because the files did is an edit
        # the cache watch is told about (CCH-1), not a break.
        self._instructions_change = changed_files(latest, self.instructions)
        self.system_text = self._system_for(self.instructions)
        self.system_message = Message.system(self.system_text)

    def _config_digest(self) -> str:
        return sha256_hex(canonical_json({"engine": self._engine_json, "system": self.system_text}))

    def _system_for(self, instructions: Instructions) -> str:
        text = instructions.text
        return f"{self.base_system}\n\n{text}" if text else self.base_system

    def use_instructions(self, instructions: Instructions) -> None:
        """Send ``instructions`` in the system prompt from the next request on (a replay puts
        back each request's recorded ones this way)."""
        if instructions.text == self.instructions.text:
            return
        self._instructions_change = changed_files(self.instructions, instructions)
        self.instructions = instructions
        self.system_text = self._system_for(instructions)
        self.system_message = Message.system(self.system_text)
        self.service.system = (self.system_message,)
        self.system_tokens = count_message(self._counter, self.system_message)
        self._config = self._config_digest()

    def _refresh_instructions(self) -> None:
        """Read the instruction files again before a request: a file that changed, appeared
        or went away, or a nested one loaded since, makes a new system prompt."""
        if self.files is not None:
            self.use_instructions(self.files.read())

    @property
    def instructions_tokens(self) -> int:
        """What the instructions add to the system prompt, in tokens."""
        if not self.instructions.text:
            return 0
        bare = count_message(self._counter, Message.system(self.base_system))
        return max(0, self.system_tokens - bare)

    def _unrecorded(self) -> Instructions | None:
        """The instructions this request sends when the session has not recorded them yet."""
        return self.instructions if self.instructions.digest != self._recorded else None

    def _recorded_now(self, instructions: Instructions) -> None:
        self._recorded = instructions.digest
        self._instructions_change = None
