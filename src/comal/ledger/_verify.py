"""``verify``: re-hash every stored entry and check that every step is whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Protocol

from ..messages import Message, message_from_dict, message_to_json, sha256_hex
from ._model import Fault, VerifyReport


class _RawSource(Protocol):
    def _raw_rows(self) -> Iterator[tuple[Any, ...]]: ...


def verify(ledger: _RawSource) -> VerifyReport:
    """Check digests, canonical form, dense sequences and step wholeness for every session.

    An assistant message whose calls have no results is a fault unless it is the session's last
    step: a session ending there is *paused* (its calls may still be answered), not damaged.
    """
    faults: list[Fault] = []
    paused: list[str] = []
    count = 0
    session: str | None = None
    expected_seq = 0
    open_step: tuple[int, set[str]] | None = None  # (step seq, call ids still unanswered)

    def close_session() -> None:
        if session is not None and open_step is not None and open_step[1]:
            paused.append(session)

    for sid, seq, step, role, digest, output_digest, body in ledger._raw_rows():
        count += 1
        if sid != session:
            close_session()
            session, expected_seq, open_step = sid, 0, None
        if seq != expected_seq:
            faults.append(Fault(sid, seq, "gap", f"expected seq {expected_seq}, found {seq}"))
        expected_seq = seq + 1
        if sha256_hex(body) != digest:
            faults.append(Fault(sid, seq, "digest", "body does not match its sha256 digest"))
            continue
        try:
            msg = message_from_dict(json.loads(body))
        except (ValueError, KeyError, TypeError) as exc:
            faults.append(Fault(sid, seq, "decode", f"body does not decode: {exc}"))
            continue
        if message_to_json(msg) != body:
            faults.append(Fault(sid, seq, "canonical", "body is not in canonical form"))
        if msg.role.value != role:
            faults.append(Fault(sid, seq, "role", f"column says {role}, body says {msg.role}"))
        faults.extend(_check_output(sid, seq, msg, output_digest))
        if seq == step:
            if open_step is not None and open_step[1]:
                missing = ", ".join(sorted(open_step[1]))
                faults.append(
                    Fault(sid, open_step[0], "split-step", f"calls without results: {missing}")
                )
            open_step = (step, {c.id for c in msg.tool_calls})
        elif open_step is None or open_step[0] != step:
            faults.append(Fault(sid, seq, "step", f"entry claims step {step} that is not open"))
        result = msg.tool_result
        if seq != step and result is not None and open_step is not None:
            if result.call_id in open_step[1]:
                open_step[1].discard(result.call_id)
            else:
                faults.append(
                    Fault(sid, seq, "orphan", f"result for {result.call_id} answers no open call")
                )
    close_session()
    summary_faults = getattr(ledger, "summary_faults", None)
    if summary_faults is not None:  # the dag engine's summaries (ledger/_summaries.py)
        faults.extend(summary_faults())
    return VerifyReport(not faults, count, tuple(faults), tuple(paused))


def _check_output(sid: str, seq: int, msg: Message, output_digest: str | None) -> list[Fault]:
    result = msg.tool_result
    if result is None:
        return (
            [Fault(sid, seq, "output-digest", "non-result entry carries an output digest")]
            if output_digest is not None
            else []
        )
    if output_digest != sha256_hex(result.text):
        return [Fault(sid, seq, "output-digest", "tool output does not match its digest")]
    return []
