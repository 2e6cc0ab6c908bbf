"""``comal summaries``: the dag engine's summary tree of a session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.tree import Tree

if TYPE_CHECKING:
    from ..ledger import SummaryRecord
from ..safe_text import safe
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
    show: Annotated[
        int | None, typer.Option("--show", help="Print summary ID's text, as stored.", min=1)
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the dag engine's summaries of a session as a tree: the frontier at the top, each
    condensed summary over its children, each leaf with the seq range it stands for; --show ID
    prints one summary's text.

    Example: comal summaries 3f2a --show 12
    """
    from ..errors import UserError

    with coded_errors(as_json), ledger() as led:
        scope = led.resolve(session)
        if show is not None:
            one = led.summary(scope, show)
            if one is None:
                raise UserError(
                    f"no summary {show} in session {scope.session}; `comal summaries "
                    f"{scope.session[:8]}` lists them"
                )
            _print_one(one, as_json)
            return
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


def _print_one(s: SummaryRecord, as_json: bool) -> None:
    if as_json:
        emit_json(summary_dict(s) | {"text": s.text})
        return
    where = (
        f"seq {s.first_seq}..{s.last_seq}"
        if s.kind == "leaf"
        else f"summaries {', '.join(map(str, s.children))}"
    )
    out.print(
        f"summary {s.id}: depth {s.depth} {s.kind} over {where} ({s.descendant_count} messages), "
        f"{s.tokens:,} tokens by {s.summarizer} ({s.level}), {s.time_range[0]} → "
        f"{s.time_range[1]}",
        markup=False,
        highlight=False,
    )
    # The text came from a summarizer reading untrusted history: shown escaped.
    out.print(safe(s.text), markup=False, highlight=False)
