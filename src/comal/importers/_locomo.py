"""LoCoMo long-term dialogue (not an agent transcript): two people chatting over dated sessions.

Imported for memory benchmarks: each ``session_N`` becomes one session, ``speaker_a`` as the
user and ``speaker_b`` as the assistant, each turn's text exact with the speaker as the
message name. ``meta["dia_ids"]`` lists the turn ids in message order, so QA evidence
(``D<N>:<k>``) maps to message indices. Shared images are kept as URL and caption in meta;
the ``qa``, ``*_summary``, ``*_observation`` and ``events_*`` annotations are benchmark data
about the dialogue, not part of it, and are not imported.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from comal.messages import Role, Text

from ._base import Faults, ImportedSession, RecordError, SessionBuilder
from ._fields import as_dict, opt, req
from ._jsonio import JsonDoc, read_json, records

_SESSION = re.compile(r"session_(\d+)")
# LoCoMo writes "1:56 pm on 8 May, 2023", with no zone: taken as UTC, as every zoneless time is.
_DATE = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})\s*",
    re.IGNORECASE,
)
_MONTHS = {
    m: n
    for n, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}


def _when(text: object) -> str | None:
    """The ISO time a session's ``date_time`` names, or None when it names none."""
    match = _DATE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return None
    hour, minute, half, day, month, year = match.groups()
    number = _MONTHS.get(month[:3].lower())
    if number is None or not 1 <= int(hour) <= 12:
        return None
    hour24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    try:
        when = datetime(int(year), number, int(day), hour24, int(minute))
    except ValueError:
        return None  # 31 February: keep the import's own time rather than guess
    return when.isoformat()


def load(path: Path, faults: Faults) -> list[ImportedSession]:
    out: list[ImportedSession] = []
    for n, doc in enumerate(read_json(path, faults)):
        out += _conversation(path, faults, doc, n)
    return out


def _conversation(path: Path, faults: Faults, doc: JsonDoc, n: int) -> list[ImportedSession]:
    value = doc.value
    faults.locate = doc.line_of
    if not isinstance(value, dict):
        raise faults.fatal("expected a LoCoMo conversation object")
    inner = value.get("conversation")
    conv: dict[str, Any] = inner if isinstance(inner, dict) else value
    base: tuple[str, ...] = ("conversation",) if conv is not value else ()
    a, b_name = conv.get("speaker_a"), conv.get("speaker_b")
    if not isinstance(a, str) or not isinstance(b_name, str):
        raise faults.fatal("speaker_a and speaker_b must be strings", field="speaker_a")
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)))
    stem = str(value.get("sample_id") or path.stem) + (f"#{n}" if n else "")
    out: list[ImportedSession] = []
    for num in numbers:
        turns = conv[f"session_{num}"]
        where = (*base, f"session_{num}")
        if not isinstance(turns, list):
            faults.bad("a session is not a list of turns", at=where)
            continue
        b = SessionBuilder(faults)
        dia_ids: list[str | None] = []
        media: dict[str, Any] = {}
        for i, raw in records(doc, turns, where, faults):
            try:
                turn = as_dict(raw, "")
                speaker = req(turn, "speaker", str)
                text = req(turn, "text", str)
                dia = opt(turn, "dia_id", str)
            except RecordError as exc:
                faults.bad(exc.reason, at=(*where, i), field=exc.field)
                continue
            role = Role.USER if speaker == a else Role.ASSISTANT
            b.add(role, [Text(text)], at=(*where, i), name=speaker)
            dia_ids.append(dia)
            if dia and ("img_url" in turn or "blip_caption" in turn):
                media[dia] = {k: turn[k] for k in ("img_url", "blip_caption", "query") if k in turn}
        date = conv.get(f"session_{num}_date_time")
        meta: dict[str, Any] = {
            "speaker_a": a,
            "speaker_b": b_name,
            "session": num,
            "date_time": date,
            "dia_ids": dia_ids,
        }
        if media:
            meta["media"] = media
        started = _when(date)
        if started is not None:
            meta["started_at"] = started  # the dialogue's own date, not the import's
        title = f"{a} and {b_name}, session {num}" + (f" ({date})" if isinstance(date, str) else "")
        out.append(
            b.finish(
                source=str(path),
                format="locomo",
                key=f"{stem}:session_{num}",
                title=title,
                meta=meta,
            )
        )
    if not out:
        raise faults.fatal("no session_N dialogue found in the LoCoMo file")
    return out
