"""Issue 19: the sandbox's masks hold wherever comal's files are.

The ledger's mask used to sit inside the already masked data directory, so bwrap could not make
its mount point and no sandboxed command ran for a real user (whose ledger is in
``~/.local/share/comal``). The layout (:func:`comal.ops._mounts.layout`) is checked two ways:
as a pure function against a model of how bwrap stacks mounts, over random trees, and with
real bubblewrap over real trees outside ``/tmp``.
"""

# covers: CFG-2

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from comal.ops import Sandbox, SandboxPolicy, SandboxStatus, default_protected_paths
from comal.ops._mounts import EMPTY_ROOTS, Kind, Layout, Mount, layout, under

SECRET = "SECRET-BYTES"
ROOTS = ("/h", "/v", "/tmp", "/run")

# -- a model of the host and of bwrap ------------------------------------------------------------


def _tree() -> st.SearchStrategy[tuple[frozenset[str], frozenset[str], list[str]]]:
    """(dirs, files, candidate paths) of a small host tree over a few roots, two of them the
    sandbox's empty ones."""
    part = st.sampled_from(["a", "b", "c"])
    path = st.builds(
        lambda root, parts: "/".join([root, *parts]),
        st.sampled_from(ROOTS),
        st.lists(part, max_size=3),
    )

    def host(drawn: list[tuple[str, bool]]) -> tuple[frozenset[str], frozenset[str], list[str]]:
        dirs: set[str] = set()
        for p, _ in drawn:
            parts = p.split("/")
            dirs.update("/".join(parts[:i]) for i in range(2, len(parts)))
        files = {p for p, is_file in drawn if is_file and p not in dirs}
        dirs.update(p for p, is_file in drawn if not is_file)
        dirs -= files
        return frozenset(dirs), frozenset(files), sorted({p for p, _ in drawn})

    return st.lists(st.tuples(path, st.booleans()), min_size=1, max_size=12).map(host)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, Kind], list[str], list[str], dict[str, Kind]]:
    dirs, files, paths = draw(_tree())
    host: dict[str, Kind] = {p: "dir" for p in (*ROOTS, *dirs)} | {p: "file" for p in files}
    extra = draw(st.lists(st.sampled_from(["/h/a/x", "/v/b/y", "/tmp/z", "/h/new"]), max_size=2))
    candidates = sorted({*paths, *extra, *dirs})
    protected = {p: host.get(p, "missing") for p in draw(st.lists(st.sampled_from(candidates)))}
    existing = sorted(host)
    writable = draw(st.lists(st.sampled_from(existing), max_size=3, unique=True))
    readable = draw(st.lists(st.sampled_from(existing), max_size=2, unique=True))
    return protected, writable, readable, host


def _effective(path: str, applied: list[Mount]) -> Mount:
    """The mount a path shows: the last one applied over it (a later mount over an ancestor
    hides every earlier one beneath it)."""
    found = Mount("root", "/")
    for mount in applied:
        if under(path, mount.path):
            found = mount
    return found


def _replay(plan: Layout, host: dict[str, Kind]) -> list[Mount]:
    """Apply ``plan`` as bwrap does, failing where bwrap would fail or a mask is wasted."""
    applied: list[Mount] = []
    for mount in plan.mounts:
        over = _effective(mount.path, applied)
        assert over.kind != "mask-file", f"{mount} inside a masked file"
        if over.kind in ("root", "ro-bind", "bind"):
            # No mount point can be made there: it must exist (a bind would make it on the host).
            want = {"mask-dir": "dir", "mask-file": "file"}.get(mount.kind)
            assert host.get(mount.path) in ((want,) if want else ("dir", "file")), mount
        if "mask" in mount.kind:
            assert not over.hides, f"{mount} lies in {over}, which already hides it"
        applied.append(mount)
    return applied


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_every_layout_is_valid_and_covers_every_protected_path(
    case: tuple[dict[str, Kind], list[str], list[str], dict[str, Kind]],
) -> None:
    protected, writable, readable, host = case
    plan = layout(protected, writable=writable, readable=readable)
    applied = _replay(plan, host)
    masks = [m.path for m in plan.mounts if "mask" in m.kind]
    assert len(masks) == len(set(masks))
    for inner in masks:  # no mask sits where another already hides it
        assert not any(
            under(inner, outer) and inner != outer and _effective(inner, applied).path == outer
            for outer in masks
        )
    said = {line.split(":")[0] for line in plan.unprotected}
    for path, kind in protected.items():
        over = _effective(path, applied)
        read_only_void = kind == "missing" and over.kind in ("root", "ro-bind")
        assert over.hides or path in said or read_only_void, (path, over, plan)
    for path in writable:
        assert _effective(path, applied) == Mount("bind", path)
    for path in readable:
        if not any(under(path, w) for w in writable):
            assert _effective(path, applied).path == path


def test_the_ledger_inside_the_masked_data_directory_gets_no_mask_of_its_own() -> None:
    data = "/home/u/.local/share/comal"
    plan = layout(
        {data: "dir", f"{data}/ledger.db": "file", f"{data}/ledger.db.locks": "dir"},
        writable=["/home/u/project"],
    )
    assert plan.masks == [("dir", data)] and plan.unprotected == ()


def test_a_workspace_inside_a_masked_directory_is_bound_back_after_it() -> None:
    data = "/home/u/.local/share/comal"
    plan = layout({data: "dir", f"{data}/ws/ledger.db": "file"}, writable=[f"{data}/ws"])
    order = [(m.kind, m.path) for m in plan.mounts if m.path.startswith(data)]
    assert order == [
        ("mask-dir", data),
        ("bind", f"{data}/ws"),
        ("mask-file", f"{data}/ws/ledger.db"),
    ]


def test_paths_under_the_private_tmp_need_no_mask_unless_a_bind_shows_them() -> None:
    plan = layout(
        {"/tmp/l/ledger.db": "file", "/tmp/ws/ledger.db": "file", "/tmp/ws/new": "missing"},
        writable=["/tmp/ws"],
    )
    assert plan.masks == [("file", "/tmp/ws/ledger.db")]
    assert plan.unprotected == ("/tmp/ws/new: it does not exist yet and lies in a writable path",)
    assert [m.path for m in plan.mounts[: len(EMPTY_ROOTS)]] == list(EMPTY_ROOTS)


def test_the_workspace_itself_or_the_root_cannot_be_masked() -> None:
    plan = layout({"/": "dir", "/w": "dir"}, writable=["/w"])
    assert plan.masks == [] and len(plan.unprotected) == 2


# -- real bubblewrap ------------------------------------------------------------------------------


@pytest.fixture
def base() -> Iterator[Path]:
    """A host directory outside /tmp, the way a real home is."""
    path = Path("/var/tmp") / f"comal-masks-{uuid.uuid4().hex}"
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _run(box: Sandbox, script: str) -> subprocess.CompletedProcess[str]:
    argv, fds = box.argv(["bash", "-c", script], box.root)
    try:
        return subprocess.run(argv, capture_output=True, text=True, pass_fds=fds, timeout=30)
    finally:
        for fd in fds:
            os.close(fd)


def _secret(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SECRET)
    return path


def test_a_real_users_files_are_masked_and_commands_run(
    base: Path, sandboxed: SandboxStatus, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_home = base / "real-home"
    real_home.mkdir()
    (base / "home").symlink_to(real_home)  # a symlinked home
    home = base / "home"
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "COMAL_LEDGER",
                "COMAL_CONFIG"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    ledger = _secret(home / ".local/share/comal/ledger.db")
    sealing = _secret(home / ".local/state/comal/ledger-keys/abc.key")  # the ledger's HMAC key
    (home / ".local/share/comal/ledger.db.locks").mkdir()
    config = _secret(home / ".config/comal/config.json")
    inside = home / ".local/share/comal/projects/ws"  # a workspace inside the data dir
    key = _secret(inside / "deploy.key")
    ws_data = inside / ".comal"  # and a data dir (COMAL_CONFIG's) inside the workspace
    monkeypatch.setenv("COMAL_CONFIG", str(_secret(ws_data / "config.json")))
    protected = (*default_protected_paths(ledger), key)
    box = Sandbox(SandboxPolicy(), inside, protected)
    done = _run(
        box,
        f"cat {ledger} {config} {key} {sealing} .comal/config.json 2>&1; ls -A {ledger.parent}; "
        f"echo ok > made.txt && echo wrote; echo x > {ledger} || echo refused",
    )
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout and "wrote" in done.stdout and "refused" in done.stdout
    assert (inside / "made.txt").read_text() == "ok\n" and ledger.read_text() == SECRET
    assert box.unprotected == []


def test_a_ledger_under_tmp_is_hidden_and_the_workspace_under_tmp_stays(
    sandboxed: SandboxStatus, tmp_path: Path
) -> None:
    ledger = _secret(tmp_path / "state" / "ledger.db")
    ws = tmp_path / "ws"
    inner = _secret(ws / "ledger.db")
    box = Sandbox(SandboxPolicy(), ws, (*default_protected_paths(ledger), inner))
    done = _run(box, f"cat {ledger} ledger.db 2>&1; echo ok > out && cat out")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout and done.stdout.endswith("ok\n")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(scenarios())
def test_random_trees_under_real_bubblewrap(
    sandboxed: SandboxStatus, case: tuple[dict[str, Kind], list[str], list[str], dict[str, Kind]]
) -> None:
    protected, writable, readable, host = case
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="comal-masks-") as outside:
        with tempfile.TemporaryDirectory(prefix="comal-masks-") as inside:

            def real(path: str) -> str:  # /tmp and /run of the model are real dirs under /tmp
                root, _, rest = path[1:].partition("/")
                top = inside if root in ("tmp", "run") else outside
                return str(Path(top, root, rest)) if rest else str(Path(top, root))

            for path, kind in sorted(host.items()):
                if kind == "dir":
                    Path(real(path)).mkdir(parents=True, exist_ok=True)
                else:
                    _secret(Path(real(path)))
            ws = Path(outside, "ws")
            ws.mkdir()
            box = Sandbox(
                SandboxPolicy(writable_paths=tuple(real(p) for p in writable)),
                ws,
                tuple(Path(real(p)) for p in protected),
                readable=tuple(Path(real(p)) for p in readable),
            )
            plan = box.layout()
            files = sorted(real(p) for p, kind in host.items() if kind == "file")
            show = "".join(f"printf '\\n%s=' {f}; cat {f} 2>/dev/null; " for f in files)
            touch = "".join(f"touch {real(p)}/.w && " for p in writable if host[p] == "dir")
            done = _run(box, f"{show}echo; {touch}echo writable")
            assert done.returncode == 0 and "writable" in done.stdout, (done.stderr, plan)
            seen = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
            for f in files:  # exactly what the layout says it hides is hidden
                assert (seen[f] == SECRET) is not plan.over(f).hides, (f, plan)


def test_a_python_under_tmp_and_a_workspace_under_tmp_show_through_the_private_tmp(
    sandboxed: SandboxStatus, tmp_path: Path
) -> None:
    # A clone under /tmp: its venv's python is what the configured checks run.
    venv = tmp_path / "clone" / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "check.py").write_text("print('check ran')\n")
    command = f"{venv}/bin/python check.py"
    blind = _run(Sandbox(SandboxPolicy(), ws, python=()), command)
    assert blind.returncode != 0 and "No such file" in blind.stderr
    box = Sandbox(SandboxPolicy(), ws, python=(str(venv), "/usr"))
    assert [m for m in box.layout().mounts if m.kind == "ro-bind"] == [Mount("ro-bind", str(venv))]
    done = _run(box, command)
    assert (done.returncode, done.stdout) == (0, "check ran\n"), done.stderr
    assert "ro-bind" not in _run(box, f"touch {venv}/x && echo ro-bind").stdout
