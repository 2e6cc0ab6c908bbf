"""A bounded multi-host fault run on one PostgreSQL ledger (SCL-1, LED-2, LED-4, RES-2, DAG-8):
agent processes, each in its own process group, and ``comal serve --workers N``, whose clients
send scripted conversations through it, all write one ledger while this driver kills random
agents inside their session lock (SIGKILL to the process group; the next one resumes the
session), random serve workers (SIGKILL; the supervisor starts another) and now and then the
whole server (its process group; started again on the same port, and again whenever it refuses
to start while the database is away, as a process manager would), and restarts PostgreSQL in
immediate mode (in a thread: the kills go on while it recovers). Every wait is bounded.

Each agent runs the real agent loop (``bench/_multihost_agent.py``) with the dag engine
compacting inline and a scripted model: shell calls, each appending a line to the agent's
``effects.log`` (an effect outside the ledger) and printing enough to force summaries, then an
answer. The serve upstream is a :class:`~comal.testing.FakeServer`; each client holds its
conversation and sends it again when a turn fails (a killed worker, a restarting database).

Afterwards: ``verify`` is clean; every agent session is finished and holds exactly its script's
steps in order (none lost, none twice); every effect line is there once for a call receipted
``ok``, at most once for an ``uncertain`` one, and no call ran twice; each depth of each
session's summaries covers disjoint chunks (one summary per chunk); every conversation is one
session holding exactly what its client holds, with one request record per turn; no session
lock is left. It prints numbers and exits nonzero on any fault; it is not a test
(``tests/test_multihost_faults.py`` runs a small one).

It restarts the cluster it is given, so give it one of its own (see ``pg_faults.py``):

    COMAL_LEDGER_SECRET=$(openssl rand -hex 32) .venv/bin/python bench/multihost_faults.py \\
        --url postgresql://comal:comal@127.0.0.1:5442/comal_faults --cluster "15 faults"
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))

from _faults import drop_schema, new_schema, restart_pg, url_with_schema
from _multihost_agent import script
from _multihost_check import Outcome, Plan, check

AGENT_DRIVER = Path(__file__).with_name("_multihost_agent.py")
PROXY_MODEL = "claude-sonnet-4-5"
_WORKER_MIN_AGE_S = 1.5  # the supervisor stops on a worker dying within 1 s of start, twice


# -- the processes ------------------------------------------------------------------------------


class Agents:
    """The agent processes, forked by the agent driver's fork server; lines are read here only."""

    def __init__(self, plan: Plan, target: str, root: Path) -> None:
        from _fork_server import Zygote

        self.zygote = Zygote(AGENT_DRIVER, root / "agents.err")
        self.cmds: dict[int, dict[str, Any]] = {}
        for k in range(plan.agents):
            ws = root / f"ws{k}"
            ws.mkdir()
            path = root / f"agent{k}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in script(k, plan.steps)))
            self.cmds[k] = {
                "url": target, "k": k, "session": f"agent-{k}", "root": str(ws),
                "script": str(path), "prompt": f"Agent {k}: run the steps.",
                "lease_ttl": plan.lease_ttl,
            }  # fmt: skip
        self.pid: dict[int, int] = {}
        self.done: set[int] = set()
        self.locked: set[int] = set()  # pids that hold their session's lock
        self.exits: dict[int, str] = {}
        self.retries: list[str] = []
        for k in self.cmds:
            self.spawn(k)

    def spawn(self, k: int) -> None:
        self.pid[k] = self.zygote.spawn(self.cmds[k])

    def pump(self, wait: float = 0.0) -> None:
        """Read what the workers said, up to ``wait`` seconds for the first line."""
        by_pid = {pid: k for k, pid in self.pid.items()}
        while True:
            try:
                line = self.zygote.next(timeout=wait) if wait else self.zygote.lines.get_nowait()
            except queue.Empty:
                return
            wait = 0.0
            parts = line.split(" ", 2)
            if parts[0] == "exit":
                self.exits[int(parts[1])] = parts[2]
            elif parts[0].isdigit() and len(parts) > 1:
                k = by_pid.get(int(parts[0]), -1)
                if parts[1] == "finished":
                    self.done.add(k)
                elif parts[1] == "locked":
                    self.locked.add(int(parts[0]))
                elif parts[1] == "retry":
                    self.retries.append(f"agent {k}: {parts[2] if len(parts) > 2 else ''}")

    def running(self) -> list[int]:
        return [k for k in self.cmds if k not in self.done]

    def in_lock(self) -> list[int]:
        """The running agents past their lock: a kill there leaves a holder to clear."""
        return [k for k in self.running() if self.pid[k] in self.locked]

    def kill(self, k: int, deadline: float) -> bool:
        """SIGKILL agent ``k``'s process group and start it again; whether the kill landed."""
        pid = self.pid[k]
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended on its own just now
        while pid not in self.exits:
            if time.monotonic() > deadline:
                raise TimeoutError(f"agent {k} (pid {pid}) did not end after SIGKILL")
            self.pump(wait=0.5)
        landed = self.exits[pid] == f"-{signal.SIGKILL}"
        if k not in self.done:
            self.spawn(k)
        return landed

    def close(self) -> None:
        for pid in self.pid.values():
            if pid not in self.exits:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.zygote.close()


class Serve:
    """``comal serve --workers N`` in its own process group; its workers are its children."""

    def __init__(self, plan: Plan, target: str, upstream: str, root: Path) -> None:
        from comal.serve._run import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (root / "serve.log").open("wb")
        self.argv = [
            sys.executable, "-c", "from comal.cli import main; main()", "serve",
            "--port", str(self.port), "--upstream-anthropic", upstream,
            "--workers", str(plan.workers),
        ]  # fmt: skip
        self.env = {**os.environ, "COMAL_LEDGER": target}
        self.born: dict[int, float] = {}
        self.proc = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            self.argv, env=self.env, start_new_session=True, stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.proc = proc
        self.wait_up(time.monotonic() + 60)
        return proc

    def kill_all(self) -> None:
        """SIGKILL the whole server (its process group: the supervisor and every worker), as
        a host lost, and start it again on the same port."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.start_again()

    def start_again(self) -> None:
        # Not waited for: the clients meet a closed port until it listens, and send again.
        self.proc = subprocess.Popen(
            self.argv, env=self.env, start_new_session=True, stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    def ended(self) -> bool:
        """Whether the server exited: ``comal serve`` refuses to start (LEDGER_UNAVAILABLE)
        while the database is away, and then a process manager starts it again."""
        return self.proc.poll() is not None

    def wait_up(self, deadline: float) -> None:
        import httpx

        while True:
            try:
                httpx.get(f"{self.url}/api/sessions", timeout=1)
                return
            except httpx.HTTPError:
                if self.proc.poll() is not None:
                    raise RuntimeError("comal serve exited") from None
                if time.monotonic() > deadline:
                    raise TimeoutError("comal serve did not start") from None
                time.sleep(0.1)

    def workers(self) -> list[int]:
        pid = self.proc.pid
        try:
            found = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            return []
        now = time.monotonic()
        for p in found:
            self.born.setdefault(p, now)
        return found

    def kill_one(self, rng: random.Random) -> bool:
        """SIGKILL one worker old enough that its death is not a failing start."""
        now = time.monotonic()
        old = [p for p in self.workers() if now - self.born[p] > _WORKER_MIN_AGE_S]
        if not old:
            return False
        os.kill(rng.choice(old), signal.SIGKILL)
        return True

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # the supervisor stops its workers
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.log.close()


class Clients:
    """One thread per conversation, each turn on a new connection, a failed turn sent again."""

    def __init__(self, plan: Plan, url: str, deadline: float) -> None:
        self.url, self.turns, self.deadline = url, plan.turns, deadline
        self.stop = threading.Event()  # set when the agents are done: no more turns after that
        self.rng = random.Random(plan.seed + 1)
        self.held: dict[str, list[dict[str, Any]]] = {}
        self.retries = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._run, args=(f"conv-{j}",), daemon=True)
            for j in range(plan.clients)
        ]
        for t in self.threads:
            t.start()

    def _turn(self, name: str, messages: list[dict[str, Any]]) -> str:
        import httpx

        headers = {"x-api-key": "sk", "anthropic-version": "2023-06-01", "x-comal-session": name}
        body = {"model": PROXY_MODEL, "max_tokens": 100, "messages": messages}
        while True:
            try:
                with httpx.Client(base_url=self.url, timeout=30) as client:
                    reply = client.post("/v1/messages", json=body, headers=headers)
                if reply.status_code == 200:
                    blocks = reply.json()["content"]
                    return "".join(b["text"] for b in blocks if b["type"] == "text")
                if reply.status_code < 500:
                    raise RuntimeError(f"{name}: {reply.status_code} {reply.text[:300]}")
                why = f"{reply.status_code}"
            except httpx.HTTPError as exc:
                why = type(exc).__name__
            with self._lock:
                self.retries += 1
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"{name}: no answer before the deadline ({why})")
            time.sleep(0.2)

    def _run(self, name: str) -> None:
        messages: list[dict[str, Any]] = []
        try:
            turn = 0
            # At least ``turns`` turns, and on while the agents run, so kills land among them.
            while turn < self.turns or (not self.stop.is_set() and turn < 20 * self.turns):
                messages.append({"role": "user", "content": f"{name}: question {turn}"})
                messages.append({"role": "assistant", "content": self._turn(name, messages)})
                turn += 1
                time.sleep(self.rng.uniform(0.05, 0.3))  # a client thinking between turns
            self.held[name] = messages
        except Exception as exc:  # reported as a fault
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def running(self) -> bool:
        return any(t.is_alive() for t in self.threads)


# -- the run ------------------------------------------------------------------------------------


def _mount(plan: Plan, agents: Agents, serve: Serve, clients: Clients, out: Outcome) -> None:
    """Kill and restart until the agents and the clients are done (or the deadline passes)."""
    rng = random.Random(plan.seed)
    started = time.monotonic()
    deadline = started + plan.timeout
    # Restarts spread among the kills: the i-th once i/(restarts+1) of them landed. A fifth of
    # the kills (at least one) go to serve workers, the rest to agents inside their lock.
    restart_at = [plan.kills * (i + 1) // (plan.restarts + 1) for i in range(plan.restarts)]
    to_workers = max(1, plan.kills // 5)
    next_serve_kill = started + 1.0
    restarting = threading.Thread(target=lambda: None)
    restarting.start()
    while agents.running() or clients.running():
        if time.monotonic() > deadline:
            out.faults.append(f"not done by the deadline: agents {agents.running()} running")
            return
        if not agents.running():
            clients.stop.set()
        agents.pump(wait=rng.uniform(0.03, 0.2))
        serve.workers()  # notes when each worker was first seen: its age
        if serve.ended():
            out.serve_refused += 1
            serve.start_again()
        if plan.cluster and restart_at and out.kills >= restart_at[0] and not restarting.is_alive():
            # In a thread: kills go on while the cluster shuts down and recovers.
            restart_at.pop(0)
            restarting = threading.Thread(target=restart_pg, args=(plan.cluster,), daemon=True)
            restarting.start()
            out.pg_restarts += 1
            continue
        if out.kills >= plan.kills and out.worker_kills >= to_workers:
            continue
        workers_due = out.worker_kills < to_workers and clients.running()
        # A replaced worker must outlive its first second (or the supervisor gives up): serve
        # kills are spaced out in time, agent kills fill the ticks between them.
        if workers_due and time.monotonic() > next_serve_kill:
            if out.worker_kills % 4 == 3:  # every fourth: the whole server, as a host lost
                serve.kill_all()
                out.server_kills += 1
                landed = True
            else:
                landed = serve.kill_one(rng)
            out.worker_kills += landed
            next_serve_kill = time.monotonic() + (rng.uniform(1.0, 2.0) if landed else 0.3)
            continue
        in_lock = agents.in_lock()
        if in_lock and (out.agent_kills < plan.kills - to_workers or not workers_due):
            out.agent_kills += agents.kill(rng.choice(in_lock), deadline)
    restarting.join(timeout=120)
    out.took = time.monotonic() - started
    if plan.cluster and out.pg_restarts < plan.restarts:
        out.faults.append(f"only {out.pg_restarts} of {plan.restarts} restarts landed")
    if out.kills < plan.kills or out.worker_kills < to_workers:
        out.faults.append(
            f"only {out.kills} of {plan.kills} kills ({out.worker_kills} of serve workers, of "
            f"{to_workers}) landed before the work ended"
        )


def run(plan: Plan) -> Outcome:
    from comal.testing import FakeServer

    out = Outcome()
    schema = new_schema(plan.url, "multihost")
    target = url_with_schema(plan.url, schema)
    root = Path(tempfile.mkdtemp(prefix="multihost-"))
    replies = [{"content": f"Reply {i}.", "usage": {"input_tokens": 5, "output_tokens": 2}}
               for i in range(plan.clients * plan.turns * 60)]  # fmt: skip
    try:
        with FakeServer(replies) as fake:
            serve = Serve(plan, target, fake.anthropic_base_url, root)
            agents = None
            try:
                agents = Agents(plan, target, root)
                clients = Clients(plan, serve.url, time.monotonic() + plan.timeout)
                _mount(plan, agents, serve, clients, out)
                clients.stop.set()
                for t in clients.threads:
                    t.join(timeout=60)
                out.faults += clients.errors
                out.client_retries = clients.retries
                agents.pump()
                out.agent_retries = len(agents.retries)
                for retry in agents.retries:
                    kind = retry.split(": ", 1)[-1].split(":")[0]
                    out.why[kind] += 1
                    out.samples.setdefault(kind, retry)
                if len(serve.workers()) != plan.workers or serve.proc.poll() is not None:
                    out.faults.append(f"serve has workers {serve.workers()} at the end")
            finally:
                if agents is not None:
                    agents.close()
                serve.close()

        check(plan, schema, root, clients.held, out)
    finally:
        if not plan.keep:
            drop_schema(plan.url, schema)
            shutil.rmtree(root, ignore_errors=True)
    return out


def _print(plan: Plan, out: Outcome) -> None:
    n = out.numbers
    print(f"{plan.agents} agents x {plan.steps} steps, {plan.clients} clients x {plan.turns} "
          f"turns through serve --workers {plan.workers}, {out.took:.1f} s")  # fmt: skip
    print(f"SIGKILLs {out.kills} (agent process groups {out.agent_kills}, serve workers "
          f"{out.worker_kills}, {out.server_kills} of them the whole server), "
          f"PostgreSQL restarts (immediate) {out.pg_restarts}")  # fmt: skip
    print(f"agent reopen-and-resume after an error {out.agent_retries}, client turns sent "
          f"again {out.client_retries}, serve starts refused while the database was away "
          f"{out.serve_refused}")  # fmt: skip
    if out.why:
        print("  why: " + ", ".join(f"{w} {c}" for w, c in out.why.most_common(5)))
    for kind, sample in out.samples.items():
        print(f"  e.g. {kind}: {sample[:300]}")
    for key, value in n.items():
        print(f"{key}: {value}")
    print("faults: " + ("none" if not out.faults else "\n  " + "\n  ".join(out.faults[:20])))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--cluster", help='"VERSION NAME" of the cluster to restart')
    for name, value in vars(Plan(url="")).items():
        if isinstance(value, int) and not isinstance(value, bool):
            parser.add_argument(f"--{name}", type=int, default=value)
    parser.add_argument("--timeout", type=float, default=Plan.timeout)
    parser.add_argument("--lease-ttl", type=float, default=Plan.lease_ttl)
    parser.add_argument("--keep", action="store_true", help="keep the run's schema and files")
    args = parser.parse_args()
    if not args.cluster:
        parser.error("--cluster names the cluster the run restarts (one of its own)")
    if args.workers < 2:
        parser.error("--workers must be 2 or more: with one, comal serve runs in its own process")
    plan = Plan(**vars(args))
    out = run(plan)
    _print(plan, out)
    return 1 if out.faults else 0


if __name__ == "__main__":
    sys.exit(main())
