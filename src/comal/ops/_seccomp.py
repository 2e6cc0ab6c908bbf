"""The sandbox's seccomp filter: built with libseccomp (through ``pyseccomp``), handed to
bubblewrap as BPF (``bwrap --seccomp FD``), which loads it just before it runs the command.

Everything is allowed except, each answered with ``EPERM``:

- ``socket(AF_UNIX, ...)`` unless ``sandbox.unix_sockets``: no new Unix socket, so no host
  daemon (Docker, D-Bus, a database, an agent) is reachable through a socket file anywhere in
  the filesystem, and no abstract socket either (``socketpair``, which makes connected pairs
  for a process's own use, stays allowed);
- kernel surfaces a tool has no business with, as Docker's, Flatpak's and Codex's filters
  refuse them: ``ptrace`` and ``process_vm_readv``/``writev`` (reading another process),
  ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the new mount API, ``keyctl``,
  ``add_key``, ``request_key`` (the kernel keyring), ``bpf``, ``perf_event_open``,
  ``userfaultfd``, ``io_uring_*`` (whose operations seccomp cannot see), module loading,
  ``kexec_*``, ``reboot``, ``swapon``/``swapoff``, ``acct``, ``quotactl``, ``syslog``,
  ``open_by_handle_at``/``name_to_handle_at``, ``setns``, and new user namespaces
  (``clone``/``unshare`` with ``CLONE_NEWUSER``); ``clone3``, whose flags seccomp cannot read,
  answers ``ENOSYS`` so the C library falls back to ``clone``;
- any system call of another architecture than the machine's (a 32-bit ``int 0x80`` call
  would otherwise bypass the rules).

Where libseccomp (Debian's ``libseccomp2``) or ``pyseccomp`` is missing, there is no filter:
:func:`build_filter` raises :class:`SeccompUnavailable` and the sandbox says so in its
receipts, keeping its other walls.
"""

from __future__ import annotations

import errno
import socket
import tempfile
from typing import Any

__all__ = ["DENIED_SYSCALLS", "SeccompUnavailable", "build_filter"]

CLONE_NEWUSER = 0x10000000
DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "open_by_handle_at",
    "name_to_handle_at",
    "setns",
)


class SeccompUnavailable(Exception):
    """No filter can be built here (libseccomp or its binding is missing)."""


def _library() -> Any:
    try:
        import pyseccomp  # type: ignore[import-untyped]
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: no libseccomp.so
        raise SeccompUnavailable(
            f"no seccomp filter: libseccomp cannot be loaded ({exc}); install Debian's "
            "libseccomp2 and the pyseccomp package"
        ) from exc
    return pyseccomp


def build_filter(*, unix_sockets: bool = False) -> bytes:
    """The filter as BPF for ``bwrap --seccomp``."""
    sc = _library()
    deny = sc.ERRNO(errno.EPERM)
    try:
        f = sc.SyscallFilter(sc.ALLOW)
        f.set_attr(sc.Attr.ACT_BADARCH, deny)
        for name in DENIED_SYSCALLS:
            number = sc.resolve_syscall(sc.Arch.NATIVE, name)
            if number >= 0:  # an older libseccomp may not know the newest calls
                f.add_rule(deny, number)
        newuser = sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
        f.add_rule(deny, "clone", newuser)
        f.add_rule(deny, "unshare", newuser)
        clone3 = sc.resolve_syscall(sc.Arch.NATIVE, "clone3")
        if clone3 >= 0:
            f.add_rule(sc.ERRNO(errno.ENOSYS), clone3)
        if not unix_sockets:
            f.add_rule(deny, "socket", sc.Arg(0, sc.EQ, socket.AF_UNIX))
        with tempfile.TemporaryFile() as fh:
            f.export_bpf(fh)
            fh.seek(0)
            data = fh.read()
    except OSError as exc:
        raise SeccompUnavailable(f"no seccomp filter: libseccomp refused it ({exc})") from exc
    if not data:
        raise SeccompUnavailable("no seccomp filter: libseccomp exported an empty program")
    return data
