"""Typed errors of evidence reads (EVI-3).

Each class also derives from the :mod:`comal.errors` class a caller would already catch, so a
handler written for ``UserError`` or ``LedgerIntegrityError`` keeps working::

    EvidenceError                       root of this package's errors
    ├── EvidenceNotFound (UserError)    no such entry in the session or its direct children
    ├── EvidenceNotAllowed (ScopeError) a session that is neither this one nor a direct child
    ├── EvidenceFieldError (UserError)  the entry has no such field
    ├── EvidenceArgumentError (UserError) bad offset, limit or search pattern
    ├── EvidenceDigestMismatch (LedgerIntegrityError) ``expected_digest`` differs from the bytes
    └── EvidenceCorrupt (LedgerIntegrityError) the stored output fails its own stored digest
"""

from __future__ import annotations

from ..errors import ComalError, LedgerIntegrityError, ScopeError, UserError

__all__ = [
    "EvidenceArgumentError",
    "EvidenceCorrupt",
    "EvidenceDigestMismatch",
    "EvidenceError",
    "EvidenceFieldError",
    "EvidenceNotAllowed",
    "EvidenceNotFound",
]


class EvidenceError(ComalError):
    """Root of evidence-read errors; no page is returned when one is raised."""

    code = "EVIDENCE_ERROR"


class EvidenceNotFound(EvidenceError, UserError):
    code = "EVIDENCE_NOT_FOUND"


class EvidenceNotAllowed(EvidenceError, ScopeError):
    """EVI-3: only the session's own evidence and its direct children's may be read."""

    code = "EVIDENCE_NOT_ALLOWED"


class EvidenceFieldError(EvidenceError, UserError):
    code = "EVIDENCE_FIELD"


class EvidenceArgumentError(EvidenceError, UserError):
    code = "EVIDENCE_ARGUMENT"


class EvidenceDigestMismatch(EvidenceError, LedgerIntegrityError):
    """EVI-3: the caller's ``expected_digest`` does not name the stored bytes."""

    code = "EVIDENCE_DIGEST_MISMATCH"


class EvidenceCorrupt(EvidenceError, LedgerIntegrityError):
    """The stored output no longer hashes to the digest recorded when it was appended."""

    code = "EVIDENCE_CORRUPT"
