"""Evidence: exact, paged reads of what the ledger stores (EVI-1..4).

:func:`read_evidence` returns an :class:`EvidencePage` of one field of one entry, with offsets in
UTF-16 units, pages of at most 8,000 units, every search match, and the exact ``next_call``.
:class:`EvidenceReadArgs` is the operation's input model (its JSON Schema is what the house
registers); :func:`evidence_call` writes the call text and :func:`parse_evidence_call` reads it.
"""

from ._args import (
    EVIDENCE_READ_DESCRIPTION,
    EVIDENCE_READ_NAME,
    MAX_PAGE_UNITS,
    EvidenceReadArgs,
    Target,
    evidence_call,
    evidence_call_arguments,
    parse_evidence_call,
)
from ._errors import (
    EvidenceArgumentError,
    EvidenceCorrupt,
    EvidenceDigestMismatch,
    EvidenceError,
    EvidenceFieldError,
    EvidenceNotAllowed,
    EvidenceNotFound,
)
from ._fields import field_text, fields_of, message_text
from ._read import EvidencePage, EvidenceSource, read_evidence, read_with_args
from ._utf16 import line_count, utf16_len

__all__ = [
    "EVIDENCE_READ_DESCRIPTION",
    "EVIDENCE_READ_NAME",
    "MAX_PAGE_UNITS",
    "EvidenceArgumentError",
    "EvidenceCorrupt",
    "EvidenceDigestMismatch",
    "EvidenceError",
    "EvidenceFieldError",
    "EvidenceNotAllowed",
    "EvidenceNotFound",
    "EvidencePage",
    "EvidenceReadArgs",
    "EvidenceSource",
    "Target",
    "evidence_call",
    "evidence_call_arguments",
    "field_text",
    "fields_of",
    "line_count",
    "message_text",
    "parse_evidence_call",
    "read_evidence",
    "read_with_args",
    "utf16_len",
]
