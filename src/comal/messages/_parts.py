"""Message parts and messages: frozen values with a ``kind`` discriminator.

Parts carry no storage ids; entry ids, sequence numbers and token counts belong to the ledger.
Strings are kept exactly as the provider or tool gave them: a tool call's ``arguments`` is the
JSON *text* (OpenAI sends text, Anthropic an object we serialise once), a tool result's content
is the exact output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, TypeAlias


class Role(StrEnum):
    SYSTEM = "system"
    DEVELOPER = "developer"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class CacheHint:
    """A provider prompt-cache breakpoint on a part (Anthropic ``cache_control``)."""

    type: str = "ephemeral"
    ttl: str | None = None


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    cache: CacheHint | None = None
    kind: Literal["text"] = field(default="text", init=False)


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Reasoning/thinking. ``signature`` (Anthropic) and ``data`` (redacted thinking or OpenAI
    ``encrypted_content``) are opaque provider bytes that must be sent back unchanged."""

    text: str = ""
    signature: str | None = None
    data: str | None = None
    redacted: bool = False
    summary: tuple[str, ...] = ()
    id: str | None = None
    provider: str | None = None
    kind: Literal["reasoning"] = field(default="reasoning", init=False)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call proposed by the model. ``arguments`` is JSON text, or raw text for custom tools
    (``call_type="custom"``, e.g. Codex ``apply_patch``)."""

    id: str
    name: str
    arguments: str
    call_type: str = "function"
    cache: CacheHint | None = None
    kind: Literal["tool_call"] = field(default="tool_call", init=False)


@dataclass(frozen=True, slots=True)
class Media:
    """An image or other binary payload: by reference (URL / path / ledger blob) or inline
    base64 ``data``. ``size`` is in bytes when known."""

    mime: str
    ref: str | None = None
    data: str | None = None
    size: int | None = None
    detail: str | None = None
    kind: Literal["media"] = field(default="media", init=False)


@dataclass(frozen=True, slots=True)
class Opaque:
    """A provider's block or item comal cannot read, kept whole so nothing is lost (LED-1): a
    ``document`` with a text source, a ``search_result``, a Responses ``web_search_call``…

    ``raw`` is its JSON text, keys in the order they were sent (compact separators, UTF-8 as
    is); ``format`` is the wire format it belongs to (a converter's ``PROVIDER_*`` tag);
    ``item`` says whether it is a whole message or input item (``True``) or one block of a
    message's content (``False``). It goes back exactly to its own format and as a marked text
    placeholder to any other, and is counted by its JSON's tokens.
    """

    format: str
    raw: str
    item: bool = False
    kind: Literal["opaque"] = field(default="opaque", init=False)


ResultBlock: TypeAlias = "Text | Media | Opaque"
ResultContent: TypeAlias = "str | tuple[ResultBlock, ...]"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned for ``call_id``. ``content`` is the exact text, or a sequence of text
    and media blocks when the tool returned several (Anthropic allows lists)."""

    call_id: str
    content: str | tuple[ResultBlock, ...]
    is_error: bool = False
    name: str | None = None
    cache: CacheHint | None = None
    kind: Literal["tool_result"] = field(default="tool_result", init=False)

    @property
    def text(self) -> str:
        """The textual output: the string itself, or the text blocks joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, Text))


@dataclass(frozen=True, slots=True)
class EvidenceRef:
    """The engine's exact reference to stored output (LED-6, LIM-2)."""

    entry_id: int
    field: str
    digest: str
    size_utf16: int
    lines: int
    preview: str
    session: str | None = None
    # ``field`` names the referenced field here, so the dataclasses helper is spelt out.
    kind: Literal["evidence_ref"] = dataclasses.field(default="evidence_ref", init=False)


@dataclass(frozen=True, slots=True)
class Summary:
    """An LLM summary standing in for a range of entries (DAG engine)."""

    text: str
    depth: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    kind: Literal["summary"] = field(default="summary", init=False)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A deterministic checkpoint standing in for ``first_seq..last_seq`` (LIM-3)."""

    text: str
    first_seq: int
    last_seq: int
    kind: Literal["checkpoint"] = field(default="checkpoint", init=False)


Part: TypeAlias = (
    Text | Reasoning | ToolCall | ToolResult | Media | EvidenceRef | Summary | Checkpoint | Opaque
)

PART_TYPES: dict[str, type[Part]] = {
    "text": Text,
    "reasoning": Reasoning,
    "tool_call": ToolCall,
    "tool_result": ToolResult,
    "media": Media,
    "evidence_ref": EvidenceRef,
    "summary": Summary,
    "checkpoint": Checkpoint,
    "opaque": Opaque,
}


@dataclass(frozen=True, slots=True)
class Message:
    """One message. A ``TOOL`` message holds exactly one :class:`ToolResult`, so a stored entry
    and an evidence reference name one tool output."""

    role: Role
    parts: tuple[Part, ...]
    name: str | None = None
    # Derived once: the engine asks every message for its calls and result on every turn.
    _calls: tuple[ToolCall, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.parts, tuple):
            object.__setattr__(self, "parts", tuple(self.parts))
        if self.role is Role.TOOL and (
            len(self.parts) != 1 or not isinstance(self.parts[0], ToolResult)
        ):
            raise ValueError("a tool message holds exactly one ToolResult part")
        calls = tuple(p for p in self.parts if isinstance(p, ToolCall))
        object.__setattr__(self, "_calls", calls)

    # Constructors read better than raw dataclass calls at call sites and in tests.
    @classmethod
    def system(cls, text: str) -> Message:
        return cls(Role.SYSTEM, (Text(text),))

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(Role.USER, (Text(text),))

    @classmethod
    def assistant(cls, text: str = "", *calls: ToolCall) -> Message:
        parts: tuple[Part, ...] = ((Text(text),) if text else ()) + calls
        return cls(Role.ASSISTANT, parts)

    @classmethod
    def tool(
        cls, call_id: str, content: str | tuple[ResultBlock, ...], *, is_error: bool = False
    ) -> Message:
        return cls(Role.TOOL, (ToolResult(call_id, content, is_error),))

    @property
    def text(self) -> str:
        """Concatenated visible text (text parts and tool output), for search and previews."""
        out: list[str] = []
        for p in self.parts:
            if isinstance(p, Text):
                out.append(p.text)
            elif isinstance(p, ToolResult):
                out.append(p.text)
            elif isinstance(p, (Summary, Checkpoint)):
                out.append(p.text)
            elif isinstance(p, ToolCall):
                out.append(f"{p.name} {p.arguments}")
        return "\n".join(out)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return self._calls

    @property
    def tool_result(self) -> ToolResult | None:
        # __post_init__ guarantees a tool message's only part is its result.
        return self.parts[0] if self.role is Role.TOOL else None  # type: ignore[return-value]
