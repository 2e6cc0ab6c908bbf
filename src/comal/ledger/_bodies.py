"""Bodies at rest: large ones compressed with zstd, every digest over the uncompressed text.

An entry's or record's body is canonical JSON text (``messages/_codec.py``), and its ``digest``
is the sha256 of that text. On SQLite a body of :data:`PACK_MIN` bytes or more is stored as a
zstd frame (a BLOB) instead, when that saves at least an eighth; smaller ones, and every body
written before migration ``0008_compressed_bodies``, stay text. Reading turns a frame back into
the very same text before any digest or seal is checked, so nothing above this module can tell
the difference, and a body changed at rest still fails its digest: a BLOB that is not a zstd
frame (or not UTF-8 inside) is returned as the bytes it is, which no digest matches.

PostgreSQL keeps ``body`` as ``TEXT``: its TOAST storage already compresses every large value
at rest (pglz), so the dialect does not pack (:attr:`Dialect.packs_bodies`).
"""

from __future__ import annotations

import threading
from typing import Any

import zstandard

__all__ = ["PACK_LEVEL", "PACK_MIN", "pack", "unpack"]

# Below 512 bytes a frame saves a few dozen bytes for a call: such bodies stay text.
PACK_MIN = 512
# Level 1 compresses agent transcripts about 3.3x (level 3: 3.35x) at ~25% more speed; higher
# levels buy a few percent for several times the time on the append path.
PACK_LEVEL = 1

# Compression contexts are not safe to share between threads; each thread keeps its own.
_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    found: zstandard.ZstdCompressor | None = getattr(_local, "c", None)
    if found is None:
        found = _local.c = zstandard.ZstdCompressor(level=PACK_LEVEL)
    return found


def _decompressor() -> zstandard.ZstdDecompressor:
    found: zstandard.ZstdDecompressor | None = getattr(_local, "d", None)
    if found is None:
        found = _local.d = zstandard.ZstdDecompressor()
    return found


def pack(body: str, raw: bytes) -> str | bytes:
    """What to store for ``body`` (``raw`` its UTF-8 bytes): a zstd frame when it is large and
    compresses by an eighth or more, else the text itself."""
    if len(raw) < PACK_MIN:
        return body
    frame: bytes = _compressor().compress(raw)
    return frame if len(frame) * 8 <= len(raw) * 7 else body


def unpack(stored: Any) -> Any:
    """The body text of a stored value; anything that is not a sound frame comes back as it is
    (the digest check that follows reports it)."""
    if not isinstance(stored, bytes):
        return stored
    try:
        raw = _decompressor().decompress(stored)
        return raw.decode("utf-8", "surrogatepass")
    except (zstandard.ZstdError, UnicodeDecodeError):
        return stored
