"""The children of a coordinating agent: what a work step runs with, and the threads it runs in.

A work step is a session like any other, run by the same :class:`~comal.agent.Agent` and turn
service as its parent; only what it is given differs (:func:`child_settings`,
:func:`child_registry`): the parent's settings with the step's engine, window (never above the
parent's), turns, budget and model, no configured checks (those close the task, and the task is
the coordinator's), and a registry that is a subset of the parent's model operations, without
the coordinator's own (:data:`~comal.work.COORDINATOR_ONLY`). Its house comes from the parent's
factory with that registry: the same policy, workspace, sandbox, approver and session-lock
guard, so its permissions are never wider than its parent's (RES-6 holds for a resumed one:
the factory is the new process's).

:class:`Children` runs steps in threads of the parent's process, at most ``parallel`` at once
(a semaphore), each holding its own session's lock while it runs. A step's model comes from
:class:`ChildModels`: the runtime's :class:`SpecModels` (the session's spec, one the operator
allows in ``work.models``, or for a ``script:PATH`` session ``PATH.children/n.jsonl``), or a
library agent's :class:`SameModel` (its own provider).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..context import get_engine
from ..errors import ComalError, UserError
from ..ledger import LedgerBackend, Scope
from ..ops import Registry
from ..providers import (
    Provider,
    ProviderContext,
    check_model_spec,
    normalize_model_spec,
    provider_for,
    work_step_spec,
)
from ..tokens import TokenCounter, resolve_window
from ..turns import configure
from ..work import COORDINATOR_ONLY, WorkStepRefused
from ._catalog import TOOL_SEARCH
from ._settings import AgentSettings, TaskBudget

__all__ = [
    "ChildModels",
    "Children",
    "SameModel",
    "SpecModels",
    "child_registry",
    "child_settings",
]

SUBAGENT_NOTE = (
    "\n- You are doing one delegated step of a larger task, in your own session. Do the step, "
    "then answer with its result: that answer is what the coordinator gets."
)


class ChildModels(Protocol):
    """How a step gets its model: the spec it runs (stored in its delegation record, so a
    resumed step runs the same one) and the provider for a spec in the step's session."""

    def spec(self, n: int, requested: str | None) -> str | None: ...
    def provider(self, spec: str | None, scope: Scope) -> Provider: ...


@dataclass(frozen=True, slots=True)
class SameModel:
    """A library agent's children: the parent's provider object; no other model allowed."""

    parent: Provider

    def spec(self, n: int, requested: str | None) -> str | None:
        if requested is not None:
            raise WorkStepRefused(
                f"model {requested!r} is not allowed for work steps here; leave model out to "
                "use the session's"
            )
        return None

    def provider(self, spec: str | None, scope: Scope) -> Provider:
        return self.parent


@dataclass(frozen=True, slots=True)
class SpecModels:
    """A runtime's children: the session's model spec as its scheme gives it to a work step
    (a ``script:PATH`` session's step ``n`` reads ``PATH.children/n.jsonl``), or one the
    operator allows (``work.models``)."""

    parent: str | None
    allowed: tuple[str, ...]
    ledger: LedgerBackend
    fixed: Provider | None = None

    def spec(self, n: int, requested: str | None) -> str | None:
        if requested is not None:
            spec = normalize_model_spec(requested)
            allowed = {normalize_model_spec(s) for s in self.allowed}
            if spec != self.parent and spec not in allowed:
                raise WorkStepRefused(
                    f"model {requested!r} is not one the operator allows work steps "
                    f"(work.models: {', '.join(sorted(allowed)) or 'none'}); leave model out to "
                    "use the session's"
                )
        elif self.parent is not None:
            spec = work_step_spec(self.parent, n)  # its scheme says (script: its own file)
        else:
            return None
        try:
            check_model_spec(spec)
        except ComalError as exc:
            raise WorkStepRefused(f"work step #{n}'s model {spec}: {exc}") from exc
        return spec

    def provider(self, spec: str | None, scope: Scope) -> Provider:
        if self.fixed is not None:
            return self.fixed
        if spec is None:
            raise WorkStepRefused("this session has no model spec for its work steps")
        return provider_for(spec, ProviderContext(ledger=self.ledger, scope=scope))


def child_registry(parent: Registry, tools: Iterable[str] | None) -> Registry:
    """The step's operations: ``tools`` (default: all the parent's model operations), never
    one the parent is not offered, never the coordinator's own."""
    offered = {
        op.name: op
        for op in parent.for_surface("model")
        if op.name not in COORDINATOR_ONLY and op.name != TOOL_SEARCH
    }
    wanted = list(offered) if tools is None else list(dict.fromkeys(tools))
    wider = [t for t in wanted if t not in offered]
    if wider:
        raise WorkStepRefused(
            f"a work step's tools are a subset of yours; not yours to give: {', '.join(wider)} "
            f"(yours: {', '.join(sorted(offered))})"
        )
    return Registry(offered[name] for name in wanted)


def child_settings(
    parent: AgentSettings,
    config: Mapping[str, Any],
    model_name: str,
    counter: TokenCounter,
) -> AgentSettings:
    """The settings a step runs with, from its parent's and its delegation's ``config``."""
    engine_name = str(config.get("engine") or parent.engine_name)
    if engine_name == parent.engine_name:
        engine = parent.engine
    else:
        try:
            engine = configure(get_engine(engine_name), {}, counter)
        except UserError as exc:
            raise WorkStepRefused(f"engine {engine_name!r}: {exc}") from exc
    windows = [parent.window.window]
    if isinstance(config.get("window"), int):
        windows.append(int(config["window"]))
    tokens = config.get("budget")
    return replace(
        parent,
        model=model_name,
        window=resolve_window(model_name, override=min(windows)),
        system=parent.system + SUBAGENT_NOTE,
        max_turns=int(config.get("max_turns") or parent.work.max_turns),
        engine=engine,
        engine_name=engine_name,
        checks=(),
        budget=TaskBudget(tokens=int(tokens) if isinstance(tokens, int) else None),
    )


Body = Callable[[], None]


class Children:
    """The threads of one coordinator's steps, keyed by child session id."""

    def __init__(self, parallel: int) -> None:
        self._slots = threading.BoundedSemaphore(max(1, parallel))
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def running(self, child: str) -> bool:
        with self._lock:
            thread = self._threads.get(child)
        return thread is not None and thread.is_alive()

    def start(self, child: str, body: Body) -> bool:
        """Run ``body`` for ``child`` in a thread when a slot is free; False when it runs
        already."""
        with self._lock:
            thread = self._threads.get(child)
            if thread is not None and thread.is_alive():
                return False

            def slotted() -> None:
                with self._slots:
                    body()

            # Daemon: a process that stops dies with its steps, as a crash would; the ledger
            # holds what they did and a resume picks them up.
            thread = threading.Thread(target=slotted, name=f"work-step-{child[:8]}", daemon=True)
            self._threads[child] = thread
            thread.start()
            return True

    def join(self, children: Iterable[str], timeout: float | None = None) -> None:
        """Wait for these steps' threads (all of them for at most ``timeout`` seconds)."""
        with self._lock:
            threads = [t for c in children if (t := self._threads.get(c)) is not None]
        if timeout is None:
            for thread in threads:
                thread.join()
            return
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def join_all(self) -> None:
        with self._lock:
            children = list(self._threads)
        self.join(children)
