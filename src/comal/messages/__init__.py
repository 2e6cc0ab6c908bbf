"""The provider-neutral message model: roles, parts, messages, steps and pairs.

Wire converters live in :mod:`comal.messages.wire` (OpenAI Chat, OpenAI Responses, Anthropic).
"""

from ._codec import (
    MESSAGE_SCHEMA,
    canonical_json,
    load_json,
    message_from_dict,
    message_from_json,
    message_to_dict,
    message_to_json,
    part_from_dict,
    part_to_dict,
    sha256_hex,
)
from ._parts import (
    PART_TYPES,
    CacheHint,
    Checkpoint,
    EvidenceRef,
    Media,
    Message,
    Part,
    Reasoning,
    Role,
    Summary,
    Text,
    ToolCall,
    ToolResult,
)
from ._preamble import PREAMBLE_CLOSE, PREAMBLE_OPEN, is_preamble, preamble_text, user_words
from ._steps import Group, Pair, group_messages, open_calls, orphan_results, pairs

__all__ = [
    "MESSAGE_SCHEMA",
    "PART_TYPES",
    "PREAMBLE_CLOSE",
    "PREAMBLE_OPEN",
    "CacheHint",
    "Checkpoint",
    "EvidenceRef",
    "Group",
    "Media",
    "Message",
    "Pair",
    "Part",
    "Reasoning",
    "Role",
    "Summary",
    "Text",
    "ToolCall",
    "ToolResult",
    "canonical_json",
    "group_messages",
    "is_preamble",
    "load_json",
    "message_from_dict",
    "message_from_json",
    "message_to_dict",
    "message_to_json",
    "open_calls",
    "orphan_results",
    "pairs",
    "part_from_dict",
    "part_to_dict",
    "preamble_text",
    "sha256_hex",
    "user_words",
]
