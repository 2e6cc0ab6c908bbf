"""A deterministic extractive summarizer for the pipeline's summaries when no model is set.

Minimal on purpose and local to this engine until the shared one (``context/_extractive.py``,
written with the dag engine) lands: it keeps every user request and the first line of each
assistant message and tool result from the rendered sources, newest kept longest, and trims the
oldest non-request lines until the text fits the target. ``aggressive`` keeps requests and the
last lines only. It never calls anything; the same sources give the same bytes.
"""

from __future__ import annotations

from types import MappingProxyType

from ...tokens import TokenCounter
from .._summarizer import SummaryRequest, SummaryText

__all__ = ["PipelineExtractive"]

_LINE = MappingProxyType({"normal": 240, "aggressive": 100})


class PipelineExtractive:
    """:class:`~comal.context.Summarizer` without a model (``summarizer`` = ``extractive``)."""

    name = "extractive"

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def summarize(self, request: SummaryRequest) -> SummaryText:
        width = _LINE.get(request.level, 100)
        lines: list[tuple[bool, str]] = []
        for previous in request.previous:
            body = " ".join(previous.split())
            lines.append((True, f"Earlier summary: {body[: width * 4]}"))
        user = False
        for raw in request.sources.splitlines():
            line = raw.strip()
            if not line:
                continue
            # Only a line that starts with comal's own head names a role (its further lines are
            # indented): a quoted "[seq 9 user] ..." inside a tool output is that output's.
            if raw.startswith("[seq "):
                user = raw.split("] ", 1)[0].endswith(" user")
            is_request = user
            if request.level == "aggressive" and not is_request:
                continue
            cut = line if len(line) <= width else line[: width - 1] + "…"
            lines.append((is_request, cut))
        if request.level == "aggressive":
            tail = [ln for ln in request.sources.splitlines()[-5:] if ln.strip()]
            lines += [(False, ln[: width - 1] + ("…" if len(ln) >= width else "")) for ln in tail]
        text = self._fit(lines, request.target_tokens)
        return SummaryText(text, self.name)

    def _fit(self, lines: list[tuple[bool, str]], target: int) -> str:
        sizes = [self.counter.count(line) + 1 for _, line in lines]
        total = sum(sizes)
        dropped: set[int] = set()
        # Drop the oldest lines that are not requests first, then the oldest requests; the
        # newest line always stays.
        for keep_requests in (True, False):
            for k in range(len(lines) - 1):
                if total <= target:
                    break
                if k in dropped or (keep_requests and lines[k][0]):
                    continue
                dropped.add(k)
                total -= sizes[k]
        text = "\n".join(line for k, (_, line) in enumerate(lines) if k not in dropped)
        while self.counter.count(text) > target and len(text) > 80:
            text = text[len(text) // 4 :]
        return text
