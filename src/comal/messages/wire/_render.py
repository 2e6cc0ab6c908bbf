"""Text renderings of engine parts, for wire formats that have no place for them.

:class:`EvidenceRef`, :class:`Summary` and :class:`Checkpoint` exist only inside comal. When a
message holding one is sent to a provider it becomes a plain text block with this rendering, so the
model still sees what stands in for the original entries. The rendering is a pure function of the
part: the same part always gives the same bytes, which keeps cached prompt prefixes stable.

An evidence reference renders as::

    [stored output: entry 12, field "content", 48213 UTF-16 units, 812 lines, sha256 ab12…]
    preview:
    <preview text>
    [read it exactly: EvidenceRead(entry=12, field="content", expected_digest="ab12…")]

The call names the entry, field and digest (LED-6) so the model can page the exact bytes (EVI-1);
argument names follow EVI-2 (``expected_digest``), and ``session=`` is added for a child session's
evidence. Engines that want a richer presentation (DAG-6 headers) build it themselves; this is the
compact default.

An :class:`Opaque` part goes back as it came to its own format only; any other format gets a
marked placeholder in its place (:func:`render_opaque`), so a reader sees that something was
there and where to find it::

    [opaque anthropic block "document", 2,048 bytes of JSON: kept exactly in the ledger, sent
    only in its own format]
"""

from __future__ import annotations

import json

from .._parts import Checkpoint, EvidenceRef, Opaque, Summary

EnginePart = EvidenceRef | Summary | Checkpoint
ENGINE_PARTS = (EvidenceRef, Summary, Checkpoint)


def _quote(value: str) -> str:
    # JSON quoting gives a Python-and-JSON-compatible literal for any field or session name.
    return json.dumps(value, ensure_ascii=False)


def evidence_read_call(ref: EvidenceRef) -> str:
    """The exact ``EvidenceRead(...)`` call that reaches the referenced output."""
    args = [f"entry={ref.entry_id}", f"field={_quote(ref.field)}"]
    args.append(f"expected_digest={_quote(ref.digest)}")
    if ref.session is not None:
        args.append(f"session={_quote(ref.session)}")
    return f"EvidenceRead({', '.join(args)})"


def _render_evidence(ref: EvidenceRef) -> str:
    header = (
        f"[stored output: entry {ref.entry_id}, field {_quote(ref.field)}, "
        f"{ref.size_utf16} UTF-16 units, {ref.lines} lines, sha256 {ref.digest}"
    )
    if ref.session is not None:
        header += f", session {ref.session}"
    lines = [header + "]"]
    if ref.preview:
        lines += ["preview:", ref.preview]
    lines.append(f"[read it exactly: {evidence_read_call(ref)}]")
    return "\n".join(lines)


def _seq_range(first: int | None, last: int | None) -> str:
    if first is None and last is None:
        return ""
    return f", seq {'?' if first is None else first}..{'?' if last is None else last}"


def render_engine_part(part: EnginePart) -> str:
    """Render an engine part as the text a provider receives in its place."""
    if isinstance(part, EvidenceRef):
        return _render_evidence(part)
    span = _seq_range(part.first_seq, part.last_seq)
    if isinstance(part, Summary):
        return f"[summary, depth {part.depth}{span}]\n{part.text}"
    return f"[checkpoint{span}]\n{part.text}"


def render_opaque(part: Opaque) -> str:
    """The placeholder text of an opaque part in a format it does not belong to."""
    try:
        value = json.loads(part.raw)
    except ValueError:
        value = None
    name = None
    if isinstance(value, dict):
        name = value.get("type") if isinstance(value.get("type"), str) else value.get("role")
    what = "item" if part.item else "block"
    label = f"{what} {_quote(name)}" if isinstance(name, str) else what
    size = len(part.raw.encode("utf-8", "surrogatepass"))
    return (
        f"[opaque {part.format} {label}, {size:,} bytes of JSON: kept exactly in the ledger, "
        "sent only in its own format]"
    )
