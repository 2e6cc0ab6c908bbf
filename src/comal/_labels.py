"""How a judgment reads to a person: one function for every surface (DRV-5).

The TUI, the web page, ``comal -p``, ``comal receipts``, ``comal call`` and ``comal show`` all
label a judgment with :func:`judgment_label`, from the judgment as a receipt stores it
(:meth:`comal.ops.Judgment.as_dict`). A call a human decided reads as theirs — "approved by
user ana", "refused by operator olga" — never as the rule or mode that asked them; any other
reads "<decision> by <rule>", with the part of a compound command the decision was about.

This module imports nothing of comal's, so a command that only reads the ledger can label
what it shows without loading the house.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["judgment_label", "part_label"]

_SHOWN = 80  # characters of a part's text a label shows


def part_label(index: int, of: int, text: str) -> str:
    """``part 2 of 3, "rm -rf x"``: which part of a compound command (counted from 1)."""
    shown = " ".join(text.split())
    if len(shown) > _SHOWN:
        shown = shown[: _SHOWN - 1] + "…"
    return f'part {index} of {of}, "{shown}"'


def judgment_label(judgment: Mapping[str, Any]) -> str:
    approval = judgment.get("approval")
    if isinstance(approval, Mapping) and isinstance(approval.get("by"), Mapping):
        by = approval["by"]
        verb = "approved" if approval.get("granted") else "refused"
        return f"{verb} by {by.get('kind', 'user')} {by.get('id', '?')}"
    if judgment.get("decision") is None:  # never judged: a call an interrupt or a crash cut
        return f"not judged ({judgment.get('rule')})"
    label = f"{judgment.get('decision')} by {judgment.get('rule')}"
    part = judgment.get("part")
    if isinstance(part, Mapping):
        label += " on " + part_label(int(part["index"]), int(part["of"]), str(part["text"]))
    return label
