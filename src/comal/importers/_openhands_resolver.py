"""OpenHands 0.x resolver output (``output.jsonl``): one GitHub issue or PR per line.

A line is the resolver's ``ResolverOutput``: ``{issue, issue_type, instruction, base_commit,
git_patch, history, metrics, success, comment_success, result_explanation, error}``
(``success_explanation`` before the resolver moved into OpenHands). The resolver wrote
``history`` with ``dataclasses.asdict`` on each event, so an item holds the event's own fields,
flat: an action (``{"action": "run", "command": ..., "thought": ...}``) or an observation
(``{"observation": "run", "content": ..., "exit_code": ...}``), and no event id, source or cause:
those live outside the dataclass fields. Its first release wrote
``compatibility_for_eval_history_pairs()`` instead: ``[action, observation]`` pairs of
``event_to_dict`` events (fields nested in ``args`` / ``extras``, a ``null`` observation for an
action that had none); a pair is read as its two events in order.

Without ids, position pairs them, as the controller ran them: one action at a time, its
observation next. Each action that runs something becomes a tool call named by its action type,
with the arguments the action holds (minus the runtime's bookkeeping fields) and the synthetic id
``oh0-<line>-<history index>``; the observation after it is its result, its ``content`` kept
exactly. An action followed by anything else than an observation never got one: strict import
stops there naming the line and history item, ``--lenient`` closes it as interrupted. An action
still waiting when the history ends is left open (strict) like every importer does.

The ``instruction`` is the first user message (the history's own copy of it is not repeated),
an action's ``thought`` the assistant text before its call, a ``message`` or ``finish`` action
assistant text (a message the agent did not wait on is the resolver's automatic user reply).
Everything else on the line (the issue, ``git_patch``, ``success``, ``metrics``, ...) goes into
the session's meta.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from comal.messages import Part, Role, Text, ToolCall, ToolResult

from ._base import INTERRUPTED, Faults, ImportedSession, RecordError, SessionBuilder
from ._fields import as_dict, json_text, media_from_url, opt, req
from ._jsonio import iter_jsonl

FORMAT = "openhands-resolver"

# Actions that run nothing, so no observation answers them.
_TEXT_ACTIONS = {"message", "finish", "reject", "system"}
_BOOKKEEPING_ACTIONS = {
    "null",
    "recall",
    "change_agent_state",
    "condensation",
    "condensation_request",
    "pause",
    "resume",
    "stop",
    "start",
    "summarize",
}
# Observations of the runtime's state, not anything the model reads.
_BOOKKEEPING_OBSERVATIONS = {
    "null",
    "agent_state_changed",
    "recall",
    "condense",
    "agent_condensation",
}
# Action fields that are OpenHands' own bookkeeping, not arguments the model wrote.
_NOT_ARGS = {
    "action",
    "source",  # an event_to_dict pair's, not a field of the action
    "thought",
    "blocking",
    "is_static",
    "cwd",
    "hidden",
    "confirmation_state",
    "security_risk",
    "is_confirmed",
    "impl_source",
    "keep_prompt",
    "kernel_init_code",
    "include_extra",
}
# What the line says about the run, kept in meta as written.
_RUN_FIELDS = (
    "issue",
    "issue_type",
    "base_commit",
    "git_patch",
    "metrics",
    "success",
    "comment_success",
    "result_explanation",
    "success_explanation",
    "error",
)


def _flat(ev: dict[str, Any]) -> dict[str, Any]:
    """An event as its own fields: ``event_to_dict`` nests them, ``asdict`` does not."""
    if "action" in ev and isinstance(ev.get("args"), dict):
        return {**ev["args"], "action": ev["action"], "source": ev.get("source")}
    if "observation" in ev and isinstance(ev.get("extras"), dict):
        return {**ev["extras"], "content": ev.get("content"), "observation": ev["observation"]}
    return ev


class _Run:
    """One line's history, read in order."""

    def __init__(self, faults: Faults, lineno: int, instruction: str) -> None:
        self.faults = faults
        self.lineno = lineno
        self.b = SessionBuilder(faults)
        self.instruction: str | None = instruction  # None once it is in the session
        self.in_history = False
        self.pending: tuple[str, str, str] | None = None  # (call id, action, history field)
        self.skipped: Counter[str] = Counter()
        self.meta: dict[str, Any] = {}

    def item(self, raw: Any, i: int) -> None:
        """History item ``i``: one event, or an ``[action, observation]`` pair. A
        :class:`RecordError` names its field from ``history[i]`` on."""
        where = f"history[{i}]"
        try:
            if isinstance(raw, list):
                if len(raw) != 2:
                    raise RecordError(f"a history pair has {len(raw)} items, expected 2")
                for k in (0, 1):
                    where = f"history[{i}][{k}]"
                    self.event(_flat(as_dict(raw[k], "")), where, f"{i}-{k}")
            else:
                self.event(_flat(as_dict(raw, "")), where, str(i))
        except RecordError as exc:
            exc.field = where + (f".{exc.field}" if exc.field else "")
            raise

    def event(self, ev: dict[str, Any], where: str, position: str) -> None:
        stamp = ev.get("timestamp")
        self.b.when = stamp if isinstance(stamp, str) else None
        if "action" in ev:
            kind = req(ev, "action", str)
            if kind in _BOOKKEEPING_ACTIONS:
                self.skipped[f"action:{kind}"] += 1
            elif kind in _TEXT_ACTIONS:
                self.text_action(ev, kind, where)
            else:
                self.call(ev, kind, where, position)
        elif "observation" in ev:
            kind = req(ev, "observation", str)
            if kind in _BOOKKEEPING_OBSERVATIONS:
                self.skipped[f"observation:{kind}"] += 1
                return
            content = req(ev, "content", str)
            if self.pending is not None:
                cid = self.pending[0]
                self.pending = None
                self.b.tool(ToolResult(cid, content, is_error=kind == "error"), at=self.lineno)
                return
            # Nothing ran to cause it (an error from a malformed reply): the model saw it as a
            # user turn.
            self.begin()
            self.b.add(Role.USER, [Text(content)], at=self.lineno)
        else:
            raise RecordError("event has neither 'action' nor 'observation'", "action")

    def begin(self) -> None:
        """Before the first thing the model did: close what is waiting, place the instruction."""
        if self.pending is not None:
            self.dangling()
        if self.instruction is not None:
            self.b.add(Role.USER, [Text(self.instruction)], at=self.lineno)
            self.instruction = None

    def dangling(self) -> None:
        assert self.pending is not None
        cid, kind, where = self.pending
        self.pending = None
        what = f"{kind!r} action (tool call {cid!r})"
        if not self.faults.lenient:
            raise self.faults.fatal(
                f"{what} has no observation but the history goes on. Import with --lenient to "
                "close it as interrupted",
                at=self.lineno,
                field=where,
                advice=None,
            )
        self.b.tool(ToolResult(cid, INTERRUPTED, is_error=True), at=self.lineno)
        self.faults.closed(f"closed {where}, {what}: no observation was recorded", at=self.lineno)

    def text_action(self, ev: dict[str, Any], kind: str, where: str) -> None:
        if kind == "system":
            if self.pending is not None:
                self.dangling()
            self.b.add(Role.SYSTEM, [Text(req(ev, "content", str))], at=self.lineno)
            if "tools" in ev and "tools" not in self.meta:
                self.meta["tools"] = ev["tools"]
            return
        if kind == "message":
            content = req(ev, "content", str)
            parts: list[Part] = [Text(content)]
            for key in ("image_urls", "images_urls"):
                for k, url in enumerate(opt(ev, key, list) or []):
                    if not isinstance(url, str):
                        raise RecordError("an image URL is not a string", f"{key}[{k}]")
                    parts.append(media_from_url(url))
            source = opt(ev, "source", str)
            # Without a source: the agent waits on what it says (CodeAct sets
            # wait_for_response), the instruction and the resolver's automatic replies do not.
            user = source != "agent" if source else not ev.get("wait_for_response")
            if user and content == self.instruction:
                if self.pending is not None:
                    self.dangling()
                self.instruction = None
                self.in_history = True
            else:
                self.begin()
            self.b.add(Role.USER if user else Role.ASSISTANT, parts, at=self.lineno)
            return
        # finish / reject: what the agent said as it stopped.
        texts = [opt(ev, k, str) for k in ("thought", "final_thought")]
        said = [t for n, t in enumerate(texts) if t and t not in texts[:n]]
        outputs = opt(ev, "outputs", dict)
        self.begin()
        if outputs:
            self.meta[f"{kind}_outputs"] = outputs
        if "task_completed" in ev:
            self.meta["task_completed"] = ev["task_completed"]
        if said:
            self.b.add(Role.ASSISTANT, [Text("\n\n".join(said))], at=self.lineno)

    def call(self, ev: dict[str, Any], kind: str, where: str, position: str) -> None:
        thought = opt(ev, "thought", str)
        arguments = json_text({k: v for k, v in ev.items() if k not in _NOT_ARGS})
        self.begin()
        cid = f"oh0-{self.lineno}-{position}"
        parts: list[Part] = [*([Text(thought)] if thought else []), ToolCall(cid, kind, arguments)]
        self.b.add(Role.ASSISTANT, parts, at=self.lineno)
        self.pending = (cid, kind, where)


def _key(issue: dict[str, Any], path: Path, lineno: int) -> str:
    owner, repo, number = issue.get("owner"), issue.get("repo"), issue.get("number")
    if isinstance(owner, str) and isinstance(repo, str) and isinstance(number, int):
        return f"{owner}/{repo}#{number}"
    return f"{path.stem}:{lineno}"


def _title(issue: dict[str, Any]) -> str | None:
    title = issue.get("title")
    if not isinstance(title, str):
        return None
    return title.strip().split("\n", 1)[0][:200] or None


def load(path: Path, faults: Faults) -> list[ImportedSession]:
    out: list[ImportedSession] = []
    keys: set[str] = set()
    for lineno, rec in iter_jsonl(path, faults):
        try:
            d = as_dict(rec, "")
            history = req(d, "history", list)
            instruction = req(d, "instruction", str)
            issue = req(d, "issue", dict)
        except RecordError as exc:
            faults.bad(exc.reason, at=lineno, field=exc.field)
            continue
        run = _Run(faults, lineno, instruction)
        for i, raw in enumerate(history):
            try:
                run.item(raw, i)
            except RecordError as exc:
                faults.bad(exc.reason, at=lineno, field=exc.field)
        if run.instruction is not None:
            run.begin()  # an empty history (the agent crashed): the instruction alone
        meta: dict[str, Any] = {"line": lineno, **{k: d[k] for k in _RUN_FIELDS if k in d}}
        meta.update(run.meta)
        meta["instruction_in_history"] = run.in_history
        meta["skipped_events"] = dict(run.skipped)
        key = _key(issue, path, lineno)
        if key in keys:
            key = f"{key}@{lineno}"  # the same issue resolved twice in one file
        keys.add(key)
        out.append(
            run.b.finish(source=str(path), format=FORMAT, key=key, title=_title(issue), meta=meta)
        )
    return out
