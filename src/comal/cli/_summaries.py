"""``comal summaries``: the dag engine's summary tree of a session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.tree import Tree

if TYPE_CHECKING:
    from ..ledger import SummaryRecord
from ._common import JsonOpt, coded_errors, emit_json, ledger, out

app = typer.Typer()


def summary_dict(s: SummaryRecord) -> dict[str, Any]:
    """The ``--json`` contract of one summary."""
    return {
        "id": s.id,
        "depth": s.depth,
        "kind": s.kind,
        "sources": {"seq": [s.first_seq, s.last_seq]}
        if s.kind == "leaf"
        else {"summaries": list(s.children)},
        "descendant_count": s.descendant_count,
        "tokens": s.tokens,
        "time_range": list(s.time_range),
        "summarizer": s.summarizer,
        "level": s.level,
    }


@app.command("summaries")
def summaries_cmd(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    as_json: JsonOpt = False,
) -> None:
    """Show the dag engine's summaries of a session as a tree: the frontier at the top, each
    condensed summary over its children, each leaf with the seq range it stands for.

    Example: comal summaries 3f2a --json
    """
    with coded_errors(as_json), ledger() as led:
        scope = led.resolve(session)
        every = led.summaries(scope)
        frontier = led.summary_frontier(scope)
    if as_json:
        emit_json([summary_dict(s) for s in every])
        return
    if not every:
        out.print(f"no summaries in {scope.session} (the dag engine has not compacted it)")
        return
    by_id = {s.id: s for s in every}
    tree = Tree(f"summaries of {scope.session}: {len(every)}, frontier {len(frontier)}")

    def add(node: Tree, s: SummaryRecord) -> None:
        label = (
            f"[{s.id}] depth {s.depth} {s.kind}: seq {s.first_seq}..{s.last_seq}, "
            f"{s.descendant_count} messages, {s.tokens:,} tokens, {s.summarizer} ({s.level}), "
            f"{s.time_range[0]} → {s.time_range[1]}"
        )
        branch = node.add(label, highlight=False)
        for child in s.children:
            if child in by_id:
                add(branch, by_id[child])

    for s in frontier:
        add(tree, s)
    out.print(tree)
