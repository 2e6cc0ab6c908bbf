"""Reading JSON Lines and whole-file JSON the way damaged files need.

Real files are torn by crashes (a half-written last record), padded with NUL bytes (space the
file system allocated before the crash), or have two records joined on one line (an append
after a torn write). Strict mode names the file and line; lenient mode keeps every record it
can still read and warns about each one it cannot.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator
from json.scanner import make_scanner
from pathlib import Path
from typing import Any

from comal.errors import InputError

from ._base import Faults

_DECODER = json.JSONDecoder()
# The C scanner parses one whole value at an offset; typeshed does not describe either function.
_SCAN: Callable[[str, int], tuple[Any, int]] = make_scanner(_DECODER)  # type: ignore[arg-type]
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_WS = re.compile(r"[ \t\n\r]*")


def _ws(text: str, i: int) -> int:
    """The offset of the first non-whitespace character at or after ``i``."""
    match = _WS.match(text, i)
    return match.end() if match else i  # the pattern always matches; this satisfies mypy


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path=str(path)) from exc


def iter_jsonl(path: Path, faults: Faults) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, value)`` per record, streaming; blank lines are skipped."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path=str(path)) from exc
    with fh:
        for lineno, raw in enumerate(fh, 1):
            if b"\0" in raw:
                # A crash leaves space the file system allocated as NULs; the bytes around them
                # may still be a whole record.
                nuls = f"{raw.count(0)} NUL bytes (left by a crash)"
                raw = raw.replace(b"\0", b"")
                if raw.strip():
                    faults.bad(nuls, at=lineno, kept="removed them and read the rest of the line")
                else:
                    faults.bad(nuls, at=lineno)
                    continue
            data = raw.strip()
            if not data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                faults.bad(f"not UTF-8 at byte {exc.start}", at=lineno)
                continue
            try:
                yield lineno, json.loads(text)
                continue
            except json.JSONDecodeError as exc:
                error = exc
            if error.msg == "Extra data":
                faults.bad(
                    f"two JSON records on one line (the second at column {error.colno})",
                    at=lineno,
                    kept="read them as separate records",
                )
                yield from _split_joined(text, lineno, faults)
            elif not raw.endswith(b"\n"):
                faults.bad("torn record: the file ends inside it", at=lineno)
            else:
                faults.bad(f"invalid JSON: {error.msg} at column {error.colno}", at=lineno)


def _split_joined(text: str, lineno: int, faults: Faults) -> Iterator[tuple[int, Any]]:
    """Lenient: every whole value on a line that holds several; the rest is reported."""
    pos = 0
    while pos < len(text):
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            faults.bad(f"unreadable rest of a joined line: {exc.msg}", at=lineno)
            return
        yield lineno, value
        pos = _ws(text, pos)


class JsonDoc:
    """One JSON value read from a whole file, with what is needed to report faults in it."""

    def __init__(self, text: str, start: int, value: Any, partial: set[int]) -> None:
        self.text = text
        self.start = start
        self.value = value
        # ids of containers a tear cut short; every ancestor of a cut is cut too.
        self.partial = partial
        self._newlines: list[int] | None = None
        self._members: dict[int, dict[str | int, int]] = {}

    def is_torn(self, value: Any) -> bool:
        return id(value) in self.partial

    def line_of(self, path: tuple[str | int, ...]) -> int | None:
        """The line where the value at ``path`` starts (computed only when a fault needs it)."""
        offset: int | None = _ws(self.text, self.start)
        for key in path:
            assert offset is not None
            members = self._members.get(offset)
            if members is None:
                members = self._members[offset] = _member_offsets(self.text, offset)
            offset = members.get(key)
            if offset is None:
                break
        if offset is None:
            return None
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        return bisect.bisect_right(self._newlines, offset) + 1


def _member_offsets(text: str, offset: int) -> dict[str | int, int]:
    """Start offsets of the members of the object or array at ``offset``."""
    out: dict[str | int, int] = {}
    try:
        opener = text[offset]
        if opener not in "[{":
            return out
        i = _ws(text, offset + 1)
        index = 0
        while i < len(text) and text[i] not in "]}":
            key: str | int = index
            if opener == "{":
                key, i = _scanstring(text, i + 1)
                i = _ws(text, i)
                i = _ws(text, i + 1)  # past ':'
            out[key] = i
            _, i = _SCAN(text, i)
            i = _ws(text, i)
            if i < len(text) and text[i] == ",":
                i = _ws(text, i + 1)
            index += 1
    except (StopIteration, ValueError, IndexError):
        pass  # a torn document: the members before the tear are still located
    return out


def salvage(text: str, start: int) -> tuple[Any, set[int], int, bool]:
    """Parse the value at ``start`` keeping everything before a tear.

    Returns ``(value, partial ids, end, complete)``. Whole values are parsed by the C scanner;
    only the containers on the path to the tear are walked here, so this stays linear.
    """
    partial: set[int] = set()
    value, end, complete = _salvage(text, _ws(text, start), partial)
    return value, partial, end, complete


_MISSING = object()


def _salvage(text: str, i: int, partial: set[int]) -> tuple[Any, int, bool]:
    try:
        value, end = _SCAN(text, i)
        return value, end, True
    except (StopIteration, ValueError):
        pass
    if i >= len(text) or text[i] not in "[{":
        return _MISSING, i, False
    container: Any = [] if text[i] == "[" else {}
    partial.add(id(container))
    i = _ws(text, i + 1)
    try:
        while i < len(text) and text[i] not in "]}":
            key: str | None = None
            if isinstance(container, dict):
                key, i = _scanstring(text, i + 1)
                i = _ws(text, i)
                if text[i] != ":":
                    break
                i = _ws(text, i + 1)
            value, i, complete = _salvage(text, i, partial)
            if value is _MISSING:
                break
            if key is None:
                container.append(value)
            else:
                container[key] = value
            if not complete:
                break
            i = _ws(text, i)
            if i >= len(text) or text[i] != ",":
                break
            i = _ws(text, i + 1)
    except (ValueError, IndexError):
        pass
    return container, len(text), False


def read_json(path: Path, faults: Faults) -> list[JsonDoc]:
    """Read a whole-file JSON document (normally one; several if records were joined)."""
    data = read_bytes(path)
    if b"\0" in data:
        first = data.index(b"\0")
        faults.bad(
            f"{data.count(0)} NUL bytes (left by a crash)",
            at=data.count(b"\n", 0, first) + 1,
            kept="removed them",
        )
        data = data.replace(b"\0", b"")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise faults.fatal(
            f"not UTF-8 at byte {exc.start}", at=line, advice="re-encode the file as UTF-8"
        ) from exc
    docs: list[JsonDoc] = []
    pos = _ws(text, 0)
    if pos == len(text):
        raise faults.fatal("the file is empty", advice="there is nothing to import")
    while pos < len(text):
        value, partial, end, complete = salvage(text, pos)
        line = text.count("\n", 0, end) + 1
        if value is _MISSING:
            if not docs:
                raise faults.fatal("not JSON", at=line)
            faults.bad("unreadable data after the JSON document", at=line)
            break
        if docs:
            faults.bad(
                "a second JSON document follows the first",
                at=text.count("\n", 0, pos) + 1,
                kept="read each document as its own session",
            )
        docs.append(JsonDoc(text, pos, value, partial))
        if not complete:
            faults.bad(
                "the file is torn: it ends inside a JSON value",
                at=line,
                kept="kept the records before the tear",
            )
            break
        pos = _ws(text, end)
    return docs


def head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes, without the NULs and byte-order mark that may precede data."""
    try:
        with path.open("rb") as fh:
            data = fh.read(size)
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path=str(path)) from exc
    return data.replace(b"\0", b"").removeprefix(b"\xef\xbb\xbf")


def sniff(path: Path, size: int = 1 << 20) -> list[Any]:
    """Values from the head of a file, for detection: the first value (maybe partial), then
    the JSON Lines records after it (lines that start with ``{`` at column 0, which a
    pretty-printed document does not have inside it)."""
    text = head(path, size).decode("utf-8", "replace")
    out: list[Any] = []
    start = _ws(text, 0)
    if start < len(text):
        value, _, _, _ = salvage(text, start)
        if value is not _MISSING:
            out.append(value)
    for line in text.splitlines()[1:50]:
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def records(
    doc: JsonDoc, seq: list[Any], path: tuple[str | int, ...], faults: Faults
) -> Iterator[tuple[int, Any]]:
    """Items of a list inside ``doc``; an item cut by a tear is reported, not used."""
    faults.locate = doc.line_of  # faults in these records are located in this document
    for i, item in enumerate(seq):
        if doc.is_torn(item):
            faults.bad("incomplete record: the file ends inside it", at=(*path, i))
            continue
        yield i, item
