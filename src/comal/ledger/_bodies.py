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

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import zstandard

__all__ = ["PACK_LEVEL", "PACK_MIN", "pack", "pack_many", "unpack"]

# Below 512 bytes a frame saves a few dozen bytes for a call: such bodies stay text.
PACK_MIN = 512
# Level 1 compresses agent transcripts about 3.3x (level 3: 3.35x) at ~25% more speed; higher
# levels buy a few percent for several times the time on the append path.
PACK_LEVEL = 1

# The C backend compresses a batch on its own threads (the cffi one does not have this).
_MULTI = hasattr(zstandard.ZstdCompressor, "multi_compress_to_buffer")
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


# A batch with fewer large bodies than this is packed in the calling thread: a thread costs
# more than it saves.
_PARALLEL_MIN = 32


def pack_many(bodies: Sequence[str], raws: Sequence[bytes]) -> Callable[[], list[str | bytes]]:
    """:func:`pack` of each body, started now and collected by calling what it returns. A large
    batch (an import's) is compressed on another thread, by zstd with the GIL released, so the
    caller goes on counting tokens on another core meanwhile."""
    large = [k for k, raw in enumerate(raws) if len(raw) >= PACK_MIN]
    if len(large) < _PARALLEL_MIN or not _MULTI:
        packed = [pack(body, raw) for body, raw in zip(bodies, raws, strict=True)]
        return lambda: packed
    done: list[list[str | bytes]] = []
    failed: list[BaseException] = []

    def work() -> None:
        try:
            done.append(_pack_large(bodies, raws, large))
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=work, name="comal-pack", daemon=True)
    worker.start()

    def collect() -> list[str | bytes]:
        worker.join()
        if failed:
            raise failed[0]
        return done[0]

    return collect


def _pack_large(
    bodies: Sequence[str], raws: Sequence[bytes], large: list[int]
) -> list[str | bytes]:
    # One core stays with the caller's counting; the rest compress.
    threads = max(1, min((os.cpu_count() or 2) - 1, 8))
    frames = zstandard.ZstdCompressor(level=PACK_LEVEL).multi_compress_to_buffer(
        [raws[k] for k in large], threads=threads
    )
    out: list[str | bytes] = list(bodies)
    for i, k in enumerate(large):
        packed = frames[i].tobytes()
        if len(packed) * 8 <= len(raws[k]) * 7:
            out[k] = packed
    return out


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
