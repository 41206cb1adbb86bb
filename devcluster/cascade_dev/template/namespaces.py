"""Joining a pod's namespaces from a forked child, as `ip netns exec` and the agent's
mount wrapper (nodeagent.runner.mount_script) do for an exec'd container.

`ip netns exec NAME` joins the named network namespace, makes a private (slave) mount
namespace and remounts /sys so it shows that namespace's interfaces; the wrapper then
bind-mounts each volume at its mountPath. Python 3.11 has no os.setns/os.unshare, so
the system calls go through libc. Linux only; needs root (CAP_SYS_ADMIN). Last, the
child becomes the container's user (`become`), as `setpriv` does for an exec'd one.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

from .messages import MountSpec, UserSpec

NETNS_DIR = "/run/netns"
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_SLAVE = 0x80000
MNT_DETACH = 0x2
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _c(s: str | None) -> bytes | None:
    return s.encode() if s is not None else None


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    _check(
        _libc.mount(_c(source), _c(target), _c(fstype), ctypes.c_ulong(flags), None),
        f"mount {source or '-'} on {target}",
    )


def enter_netns(name: str) -> None:
    fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, CLONE_NEWNET), f"setns to network namespace {name}")
    finally:
        os.close(fd)


def private_mounts() -> None:
    """A mount namespace of our own whose changes do not propagate back to the host."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare the mount namespace")
    _mount(None, "/", None, MS_REC | MS_SLAVE)


def remount_sys(netns: str) -> None:
    """/sys of the joined network namespace (/sys/class/net lists its devices)."""
    _check(_libc.umount2(b"/sys", MNT_DETACH), "umount /sys")
    _mount(netns, "/sys", "sysfs", 0)


def bind(m: MountSpec) -> None:
    """One volume at its mountPath (a directory, or a file made to mount over)."""
    if os.path.isdir(m.source):
        os.makedirs(m.target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(m.target) or "/", exist_ok=True)
        if not os.path.exists(m.target):
            open(m.target, "a").close()
    _mount(m.source, m.target, None, MS_BIND)
    if m.read_only:
        _mount(None, m.target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def enter(netns: str | None, mounts: Sequence[MountSpec]) -> None:
    """Join the pod's network namespace and set up its mounts (either may be absent)."""
    if netns:
        enter_netns(netns)
    if netns or mounts:
        private_mounts()
    if netns:
        remount_sys(netns)
    for m in mounts:
        bind(m)


def become(user: UserSpec) -> None:
    """Take on the container's user (after the mounts, which need root): dropping root's
    uid clears every capability, and no new privileges if asked."""
    if user.no_new_privs:
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    os.setgroups(user.groups)
    os.setgid(user.gid)
    os.setuid(user.uid)
