"""A bounded capture of one output stream: the whole up to a cap, then its head and its tail.

Memory stays bounded however much a process writes (``yes`` runs at gigabytes a second): at
most half the cap of head and, between trims, twice half the cap of tail. The sha256 and the
size cover every byte the process wrote; :attr:`Captured.dropped` says exactly how many bytes
from the middle were not kept. Nothing is ever made up (EVI-4): the kept bytes are the
process's own, and the cuts fall on UTF-8 character boundaries so that valid text stays
valid (the few bytes of a character cut in two count as dropped).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["DEFAULT_OUTPUT_CAP", "Captured", "Spool"]

DEFAULT_OUTPUT_CAP = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Captured:
    """What was kept of a stream. ``head + tail`` are its first and last bytes; ``dropped``
    bytes between them were not kept (``0`` means ``head + tail`` is the whole stream)."""

    head: bytes
    tail: bytes
    size: int
    sha256: str
    dropped: int

    @property
    def data(self) -> bytes:
        return self.head + self.tail

    @property
    def kept(self) -> int:
        return len(self.head) + len(self.tail)


def _char_start(data: bytes | bytearray, at: int) -> int:
    """The nearest UTF-8 character start at or before ``at`` (at most 3 bytes back)."""
    back = at
    while back > 0 and at - back < 3 and (data[back] & 0xC0) == 0x80:
        back -= 1
    return back if (data[back] & 0xC0) != 0x80 else at


class Spool:
    def __init__(self, cap: int = DEFAULT_OUTPUT_CAP) -> None:
        if cap < 2:
            raise ValueError("the output cap must be at least 2 bytes")
        self.cap = cap
        self._head_cap = cap // 2
        self._tail_cap = cap - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self._hash = hashlib.sha256()
        self.size = 0

    @property
    def held(self) -> int:
        """Bytes held in memory right now (bounded by 1.5 x the cap)."""
        return len(self._head) + len(self._tail)

    def write(self, data: bytes) -> None:
        self.size += len(data)
        self._hash.update(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self._tail_cap:
                del self._tail[: len(self._tail) - self._tail_cap]

    def finish(self) -> Captured:
        head = bytes(self._head)
        tail = bytes(self._tail[-self._tail_cap :]) if self._tail else b""
        if self.size > len(head) + len(tail):
            cut = _char_start(head, len(head) - 1) if head else 0
            # The last character of the head is whole only if its sequence fits.
            if head and _seq_len(head[cut]) > len(head) - cut:
                head = head[:cut]
            skip = 0
            while skip < min(3, len(tail)) and (tail[skip] & 0xC0) == 0x80:
                skip += 1
            tail = tail[skip:]
        dropped = self.size - len(head) - len(tail)
        return Captured(head, tail, self.size, self._hash.hexdigest(), dropped)


def _seq_len(lead: int) -> int:
    if lead < 0x80:
        return 1
    if lead >> 5 == 0b110:
        return 2
    if lead >> 4 == 0b1110:
        return 3
    if lead >> 3 == 0b11110:
        return 4
    return 1
