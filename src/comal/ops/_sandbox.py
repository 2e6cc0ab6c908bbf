"""The OS sandbox for the processes the house starts: bubblewrap (``bwrap``).

Pattern rules are advisory; this is the enforcement. A sandboxed Bash call (and an MCP server,
:mod:`._mcp`) runs as::

    bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /run
          [--ro-bind READABLE READABLE ...]                             # servers only
          --bind WORKSPACE WORKSPACE [--bind EXTRA EXTRA ...]
          [--ro-bind-data FD FILE | --tmpfs DIR ...]                    # protected paths
          [--remount-ro DIR ...]
          --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try [--unshare-net]
          --die-with-parent --new-session --cap-drop ALL [--seccomp FD]
          --chdir WORKSPACE -- prlimit --as=CAP -- bash -c COMMAND

- the whole filesystem is read-only; the workspace (and ``writable_paths``) writable; ``/tmp``
  private; ``/run`` empty; a workspace under ``/tmp`` is bound over the private one, and so is
  the Python installation comal runs from (a clone under ``/tmp`` with its venv), read-only;
- **protected paths** are masked: a file reads as empty and cannot be written, renamed,
  removed or replaced (it is a read-only mount point); a directory is an empty read-only
  tmpfs. By default: comal's configuration and data directories, ``COMAL_CONFIG``,
  ``COMAL_LEDGER``, the house's own ledger file with its ``-wal``/``-shm``/``-journal`` and its
  ``.locks`` directory, plus the house's ``protected_paths`` and the policy's
  ``sandbox.protected_paths``. The mounts are laid out by :mod:`._mounts` (sorted by depth, a
  path already hidden gets no mask of its own) wherever these paths are: the ledger inside the
  masked data directory, a workspace inside it, a symlinked home, anything under ``/tmp``;
- the environment loses every variable that looks like a secret (``*_API_KEY``, ``*_TOKEN``,
  ``*_SECRET``, ``*_PASSWORD``, ``*_KEY``, ``COMAL_*``, ``PGPASSWORD``) unless
  ``sandbox.env_keep`` names it;
- no network (a private network namespace with only a loopback) unless ``sandbox.network``;
- its own PID namespace: when the shell exits, or is killed at its timeout, every process it
  started dies with it (``cmd &``, ``nohup``, double forks, ``setsid`` included);
- all capabilities dropped, even when comal runs as root, so mounts cannot be undone;
- a **seccomp filter** (:mod:`._seccomp`): no Unix sockets unless ``sandbox.unix_sockets`` —
  so no host daemon's socket file (Docker, D-Bus, PostgreSQL), wherever it lies, and no
  abstract socket can be reached — and no ptrace, new user namespaces, mounts, keyring, bpf,
  io_uring or module loading;
- a **memory cap**: every process inside gets ``RLIMIT_AS`` = ``sandbox.memory_cap`` (2 GiB
  by default) as soft and hard limit, so an allocation past it fails inside the tool (which
  says so: the receipt then carries ``MEMORY_CAP``) instead of taking the host down.

Address space is not memory used: runtimes that reserve large ranges at start need a larger
cap (a JVM reserves a quarter of the machine's memory for its heap and 1 GiB of class space,
and fails to start under 2 GiB; Python, Node, Go, git and the shell run well under it).

Residual risks, said plainly: the rest of the filesystem is readable (as with Claude Code's
sandbox); the memory cap is per process (a command that starts many processes may use many
times it; there is no cgroup, which needs privileges these machines do not give) and there is
no CPU cap besides the timeout; a protected path that does not exist yet inside the workspace
cannot be kept from being created (it is listed in :attr:`Sandbox.unprotected`); where
libseccomp is missing there is no seccomp filter (receipts say ``seccomp: false``).

:func:`sandbox_status` says whether the sandbox is available and active, for ``comal doctor``
and the start of a session. Without a usable sandbox the judge refuses Bash calls that no
human approved (rule ``sandbox:unavailable``), and an MCP server is not started, unless the
operator opted out explicitly (``sandbox.enabled = false`` or ``sandbox.allow_unsandboxed =
true``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir, user_data_dir, user_state_dir

from ._mounts import EMPTY_ROOTS, Kind, Layout, layout, under
from ._seccomp import SeccompUnavailable, build_filter

__all__ = [
    "DEFAULT_MEMORY_CAP",
    "Sandbox",
    "SandboxPolicy",
    "SandboxStatus",
    "default_protected_paths",
    "out_of_memory",
    "sandbox_status",
    "scrub_env",
]

_SECRET = re.compile(
    r"(^COMAL_|API_KEY|_TOKEN$|_SECRET$|SECRET_|PASSWORD|_KEY$|^PGPASS|_CREDENTIALS?$)",
    re.IGNORECASE,
)
_PROBE_TIMEOUT = 10.0
_OOM = re.compile(
    rb"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory|memory exhausted"
    rb"|xmalloc: cannot allocate|memory allocation of \d+ bytes failed|OutOfMemoryError"
    rb"|Could not (?:reserve|allocate) [^\n]*space",  # the JVM reserving its heap at start
    re.IGNORECASE,
)
DEFAULT_MEMORY_CAP = 2 << 30
MIN_MEMORY_CAP = 64 << 20
MAX_MEMORY_CAP = 1 << 40
# A slot for a descriptor while a launcher's command line is built; no real argument can hold
# a NUL, so none can be mistaken for one.
_SLOT = "\0slot"
# Run by the host's Python before bwrap when the spawner cannot pass descriptors (the MCP SDK):
# for each slot ``index:hex`` it fills a pipe with those bytes (empty for a mask: bwrap reads
# to EOF at once; the BPF program for --seccomp), puts its read end in the slot, and execs.
_LAUNCH = (
    "import os,sys\n"
    "a=sys.argv[2:]\n"
    "for s in filter(None,sys.argv[1].split(',')):\n"
    " i,h=s.split(':');r,w=os.pipe();os.write(w,bytes.fromhex(h));os.close(w)\n"
    " os.set_inheritable(r,True);a[int(i)]=str(r)\n"
    "os.execvp(a[0],a)\n"
)
# The memory cap inside the sandbox where util-linux's prlimit is missing.
_RLIMIT = (
    "import os,resource,sys\n"
    "n=int(sys.argv[1]);resource.setrlimit(resource.RLIMIT_AS,(n,n))\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What the sandbox allows; operator settings (``policy.sandbox`` in the config file).

    ``enabled = False`` is the operator's explicit opt-out: Bash runs unsandboxed and its
    receipts say so. ``allow_unsandboxed`` keeps the sandbox where it works and runs without it
    where it does not, instead of refusing.
    """

    enabled: bool = True
    allow_unsandboxed: bool = False
    network: bool = False
    writable_paths: tuple[str, ...] = ()
    protected_paths: tuple[str, ...] = ()
    env_keep: tuple[str, ...] = ()
    memory_cap: int | None = DEFAULT_MEMORY_CAP
    unix_sockets: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "allow_unsandboxed": self.allow_unsandboxed,
            "network": self.network,
            "writable_paths": list(self.writable_paths),
            "protected_paths": list(self.protected_paths),
            "env_keep": list(self.env_keep),
            "memory_cap": self.memory_cap,
            "unix_sockets": self.unix_sockets,
        }


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """``available``: bubblewrap runs here; ``active``: Bash will run inside it."""

    available: bool
    active: bool
    reason: str
    version: str | None = None
    backend: str = "bubblewrap"
    network: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "available": self.available,
            "active": self.active,
            "reason": self.reason,
            "version": self.version,
            "network": self.network,
        }


def _probe(bwrap: str) -> tuple[bool, str, str | None]:
    try:
        done = subprocess.run(
            [bwrap, "--version"], capture_output=True, text=True, timeout=_PROBE_TIMEOUT
        )
        version = done.stdout.strip().removeprefix("bubblewrap ").strip() or None
        probe = subprocess.run(
            [
                bwrap,
                *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
                *("--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent"),
                *("--new-session", "--cap-drop", "ALL", "--", "true"),
            ],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"bubblewrap ({bwrap}) could not be run: {exc}", None
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"])[-1]
        return False, f"bubblewrap is installed but cannot create a sandbox here: {why}", version
    try:
        build_filter()
        seccomp = "with its seccomp filter"
    except SeccompUnavailable as exc:
        seccomp = f"WITHOUT a seccomp filter ({exc})"
    return True, f"bubblewrap {version or '?'} works here, {seccomp}", version


def _machine(bwrap: str | None) -> tuple[bool, str, str | None]:
    found = bwrap or shutil.which("bwrap")
    if found is None:
        return (
            False,
            "bubblewrap (bwrap) is not installed; install it (Debian/Ubuntu: "
            "apt-get install bubblewrap)",
            None,
        )
    return _probe(found)


def sandbox_status(
    policy: SandboxPolicy | None = None, *, bwrap: str | None = None
) -> SandboxStatus:
    """Probe this machine: is bubblewrap installed and able to build the sandbox, and would
    ``policy`` use it? Runs two short processes; call it once per session."""
    policy = policy if policy is not None else SandboxPolicy()
    return _status(policy, *_machine(bwrap))


def _status(
    policy: SandboxPolicy, available: bool, reason: str, version: str | None
) -> SandboxStatus:
    if not policy.enabled:
        reason = "turned off by the operator (sandbox.enabled = false): Bash runs unsandboxed"
        return SandboxStatus(available, False, reason, version, network=True)
    if not available and policy.allow_unsandboxed:
        reason += "; the operator allows running without it (sandbox.allow_unsandboxed)"
    if available:
        cap = policy.memory_cap
        reason += f"; memory cap {cap >> 20:,} MiB per process" if cap else "; no memory cap"
    return SandboxStatus(available, available, reason, version, network=policy.network)


def default_protected_paths(
    ledger_path: str | Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[Path, ...]:
    """comal's own files: configuration, data and state directories (the state directory
    holds the ledgers' sealing keys: a command that could read one could forge a seal),
    ``COMAL_CONFIG``, ``COMAL_LEDGER`` and the given ledger file with its SQLite companions and
    its session locks (``<ledger>.locks``)."""
    env = os.environ if env is None else env
    out = [
        Path(user_config_dir("comal", appauthor=False)),
        Path(user_data_dir("comal", appauthor=False)),
        Path(user_state_dir("comal", appauthor=False)),
    ]
    for var in ("COMAL_CONFIG", "COMAL_LEDGER"):
        value = env.get(var)
        if value and "://" not in value:
            out.append(Path(value).expanduser())
    ledgers = [Path(str(ledger_path)).expanduser()] if ledger_path else []
    if env.get("COMAL_LEDGER") and "://" not in env["COMAL_LEDGER"]:
        ledgers.append(Path(env["COMAL_LEDGER"]).expanduser())
    for led in ledgers:
        out += [led, *(led.with_name(led.name + s) for s in ("-wal", "-shm", "-journal", ".locks"))]
    return tuple(dict.fromkeys(out))


def out_of_memory(stderr: bytes) -> bool:
    """Does this error output say an allocation failed? Under ``RLIMIT_AS`` a process is not
    killed: its allocation fails and it reports that in its own words, so these are the words
    of the common runtimes (Python, glibc's strerror, C++, bash, Go, Rust, Node, Java)."""
    return _OOM.search(stderr) is not None


def scrub_env(env: Mapping[str, str], keep: Iterable[str] = ()) -> dict[str, str]:
    """``env`` without the variables that look like secrets (see the module docstring)."""
    kept = set(keep)
    return {k: v for k, v in env.items() if k in kept or not _SECRET.search(k)}


def _python_homes() -> tuple[str, ...]:
    """Where this interpreter and its environment live (a venv's and its base's), and each
    folder its executable's symlinks pass through (a venv made by a ``python3`` that was
    itself a link elsewhere runs only if that link resolves inside the sandbox too)."""
    homes = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    link = sys.executable
    for _ in range(16):  # a chain of links, bounded like the kernel's
        if not link or not os.path.islink(link):
            break
        target = os.readlink(link)
        link = os.path.normpath(os.path.join(os.path.dirname(link), target))
        homes.append(os.path.dirname(link))
    return tuple(dict.fromkeys(os.path.realpath(p) for p in homes if os.path.isdir(p)))


@dataclass
class Sandbox:
    """One house's sandbox: its policy, the workspace, the protected paths, and the machine
    probe (run at most once per instance; ``policy`` may change, the probe stays)."""

    policy: SandboxPolicy
    root: Path
    protected: tuple[Path, ...] = ()
    bwrap: str | None = None
    readable: tuple[Path, ...] = ()
    python: tuple[str, ...] = field(default_factory=_python_homes)
    _machine: tuple[bool, str, str | None] | None = field(default=None, repr=False)
    _bpf: dict[bool, tuple[bytes | None, str]] = field(default_factory=dict, repr=False)

    @property
    def status(self) -> SandboxStatus:
        if self._machine is None:
            self._machine = _machine(self.bwrap)
        return _status(self.policy, *self._machine)

    @property
    def active(self) -> bool:
        return self.status.active

    @property
    def refuses_unapproved(self) -> bool:
        """True when Bash without a human's approval must be refused: the sandbox is wanted
        but cannot run, and the operator did not opt out."""
        policy = self.policy
        return policy.enabled and not policy.allow_unsandboxed and not self.status.available

    def _writable(self) -> list[str]:
        out = [os.path.realpath(self.root)]
        for raw in self.policy.writable_paths:
            path = os.path.realpath(os.path.expanduser(raw))
            if os.path.isdir(path) or os.path.isfile(path):
                out.append(path)
        return out

    def _readable(self) -> list[str]:
        out = [str(p) for p in self.readable if os.path.exists(p)]
        # The rest of the filesystem is readable; the private /tmp must not take away the
        # Python comal runs from (a checkout cloned under /tmp, its venv, checks run with it).
        out += [p for p in self.python if any(under(p, e) for e in EMPTY_ROOTS)]
        if self.policy.network:
            resolv = os.path.realpath("/etc/resolv.conf")
            if under(resolv, "/run"):  # systemd-resolved's stub lives under /run
                out.append(os.path.dirname(resolv))
        return out

    def layout(self) -> Layout:
        """Where every mount goes (:mod:`._mounts`), from what the protected paths are on the
        host now. Paths are resolved first: a mount lands on what a symlink points to, so a
        symlinked home and its real path are one path."""
        wanted = [*self.protected, *(Path(p).expanduser() for p in self.policy.protected_paths)]
        protected: dict[str, Kind] = {}
        for raw in wanted:
            path = os.path.realpath(raw)
            if os.path.isabs(path):
                kind: Kind = "dir" if os.path.isdir(path) else "file"
                protected[path] = kind if os.path.exists(path) else "missing"
        return layout(protected, writable=self._writable(), readable=self._readable())

    def masks(self) -> tuple[list[tuple[str, str]], list[str]]:
        """``(kind, path)`` masks (``file`` or ``dir``) and the protected paths that cannot be
        masked, with why."""
        plan = self.layout()
        return plan.masks, list(plan.unprotected)

    @property
    def unprotected(self) -> list[str]:
        return self.masks()[1]

    def for_server(self, network: bool, readable: Iterable[str | Path] = ()) -> Sandbox:
        """This sandbox for a long-lived server: its own network setting (not Bash's) and
        ``readable`` paths that the private ``/tmp`` and empty ``/run`` would hide, shown
        read-only. The machine probe is shared."""
        self.status  # probe once, for every server and Bash alike  # noqa: B018
        extra = tuple(Path(os.path.realpath(os.path.expanduser(p))) for p in readable)
        return replace(
            self,
            policy=replace(self.policy, network=network),
            readable=tuple(dict.fromkeys((*self.readable, *extra))),
        )

    def argv(self, command: list[str], cwd: Path) -> tuple[list[str], list[int]]:
        """The bwrap command line for ``command`` and the descriptors it must inherit (the
        caller passes them with ``pass_fds`` and closes them after the start)."""
        fds: list[int] = []

        def data(payload: bytes) -> str:
            read, write = os.pipe()
            os.write(write, payload)  # a few hundred bytes at most: the pipe holds them
            os.close(write)
            fds.append(read)
            return str(read)

        return self._build(command, cwd, data), fds

    def launch_argv(self, command: list[str], cwd: Path) -> list[str]:
        """A command line that needs no inherited descriptors, for a spawner that takes only
        an argv (the MCP SDK's ``stdio_client``): the host's Python fills the pipes bwrap
        reads (empty masks, the seccomp program), then becomes bwrap."""
        payloads: list[bytes] = []

        def data(payload: bytes) -> str:
            payloads.append(payload)
            return _SLOT

        args = self._build(command, cwd, data)
        slots = [i for i, a in enumerate(args) if a == _SLOT]
        for i in slots:
            args[i] = "-1"  # the launcher puts the descriptor it opens here
        spec = ",".join(f"{i}:{p.hex()}" for i, p in zip(slots, payloads, strict=True))
        return [sys.executable, "-I", "-S", "-c", _LAUNCH, spec, *args]

    def preview(self, command: list[str], cwd: Path) -> str:
        """The command line :meth:`argv` would run, as a shell would show it, with ``FD`` for
        the descriptors; it opens none, and needs no bubblewrap (to say what would have run)."""
        return shlex.join(self._build(command, cwd, lambda _payload: "FD"))

    def seccomp(self) -> tuple[bytes | None, str]:
        """The seccomp program for this policy (``None`` where none can be built) and why."""
        key = self.policy.unix_sockets
        if key not in self._bpf:
            try:
                self._bpf[key] = (build_filter(unix_sockets=key), "seccomp filter loaded")
            except SeccompUnavailable as exc:
                self._bpf[key] = (None, str(exc))
        return self._bpf[key]

    def _capped(self, command: list[str]) -> list[str]:
        """``command`` under the memory cap: every process inside gets ``RLIMIT_AS`` as both
        its soft and hard limit, which without capabilities it cannot raise."""
        cap = self.policy.memory_cap
        if cap is None:
            return command
        prlimit = shutil.which("prlimit")
        if prlimit is not None:
            return [prlimit, f"--as={cap}", "--", *command]
        return [sys.executable, "-I", "-S", "-c", _RLIMIT, str(cap), *command]

    def _build(self, command: list[str], cwd: Path, data: Callable[[bytes], str]) -> list[str]:
        bwrap = self.bwrap or shutil.which("bwrap") or "bwrap"
        args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        plan = self.layout()
        for mount in plan.mounts:
            path = mount.path
            if mount.kind == "tmpfs" or mount.kind == "mask-dir":
                args += ["--tmpfs", path]
            elif mount.kind == "ro-bind" or mount.kind == "bind":
                args += [f"--{mount.kind}", path, path]
            elif mount.kind == "mask-file":
                args += ["--perms", "0444", "--ro-bind-data", data(b""), path]
        # Last: what is bound back inside a masked directory was mounted while it was writable.
        for kind, path in plan.masks:
            if kind == "dir":
                args += ["--remount-ro", path]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.policy.network:
            args.append("--unshare-net")
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        bpf, _ = self.seccomp()
        if bpf is not None:
            args += ["--seccomp", data(bpf)]
        args += ["--chdir", str(cwd), "--", *self._capped(command)]
        return args
