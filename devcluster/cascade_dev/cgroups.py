"""The cpu cgroups that hold simulated nodes to their quotas: the reads and writes.

`cpuquota` decides which group and what text; this module is the only one that touches
the cgroup filesystem. The node agent calls `ensure` for every quota'd node when it
starts (a re-run `cascade dev up` with another `--node-cpu` rewrites the quota in place
itself, `reconcile.apply_quotas`, so running pods take the new limit at once) and `place`
right after it spawns a container; `cascade dev down` calls `release_all` once the pods
are dead. Every path is under `Hierarchy.mount`, so tests point it at a temporary
directory (with a fake `/proc` beside it) instead of /sys/fs/cgroup.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Callable, Collection
from pathlib import Path

from cascade_dev.cpuquota import (
    PROCS,
    V1,
    V1_QUOTA,
    V1_TASKS,
    V2,
    V2_CONTROLLERS,
    V2_SUBTREE,
    Hierarchy,
    base_files,
    flavour_of,
    own_group,
    parse_pids,
    parse_quota,
    parse_stat,
    quota_file_names,
    quota_files,
    session_of,
    v2_root_delegates_cpu,
)

SYSFS = Path("/sys/fs/cgroup")
PROC = Path("/proc")
# Where pods see the v1 cpu hierarchy: their network namespace remounts /sys, which
# hides /sys/fs/cgroup, so the agent bind-mounts the hierarchy here (a pod's private
# mount namespace is a slave copy of the host's and keeps it).
EXPOSED = Path("/run/cascade-dev/cgroup-cpu")
RELEASE_WAIT_S = 3.0  # dying processes keep a group busy for a moment


class CgroupError(RuntimeError):
    pass


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _write(path: Path, text: str) -> None:
    """Replace a control file's value (cgroupfs ignores the truncation)."""
    with open(path, "w") as f:
        f.write(text)


def _move(procs: Path, pid: int) -> bool:
    """Write one pid into a cgroup.procs; False when the process is already gone.
    Appending keeps every write visible in a test's plain file."""
    try:
        with open(procs, "a") as f:
            f.write(f"{pid}\n")
    except OSError as e:
        if e.errno == errno.ESRCH:
            return False
        raise
    return True


def detect(sysfs: Path = SYSFS) -> Hierarchy | None:
    """The host's cpu hierarchy: v2 when the unified root offers cpu, else v1's cpu mount."""
    v1 = sysfs / "cpu"
    flavour = flavour_of(_read(sysfs / V2_CONTROLLERS), (v1 / V1_QUOTA).exists())
    if flavour is None:
        return None
    return Hierarchy(flavour, sysfs if flavour == V2 else v1)


class CpuCgroups:
    """Cascade's groups in one cpu hierarchy."""

    def __init__(
        self,
        hierarchy: Hierarchy,
        *,
        proc: Path = PROC,
        rmdir: Callable[[Path], None] = os.rmdir,
        bind: Callable[[Path, Path], None] | None = None,
    ) -> None:
        self.hierarchy = hierarchy
        self._proc = proc
        self._rmdir = rmdir  # cgroupfs removes a group's files with it; tests' dirs do not
        self._bind = bind or bind_mount  # tests link instead of mounting

    @classmethod
    def detect(cls, sysfs: Path = SYSFS, proc: Path = PROC) -> CpuCgroups | None:
        h = detect(sysfs)
        return cls(h, proc=proc) if h else None

    def problem(self) -> str | None:
        """Why node groups cannot be made here, or None when they can."""
        h = self.hierarchy
        if not os.access(h.mount, os.W_OK):
            return f"{h.mount} is not writable (--node-cpu needs root)"
        if h.flavour == V2 and not v2_root_delegates_cpu(_read(h.mount / V2_SUBTREE) or ""):
            return (
                f"cpu is not enabled in {h.mount / V2_SUBTREE}; Cascade never changes the "
                "root group (enable it there, or delegate cpu to this service)"
            )
        return None

    # -- node groups ----------------------------------------------------------------------

    def ensure(self, node: str, cores: float | None) -> Path:
        """Make (or update) the node's group with a quota of `cores` (None: unlimited)."""
        h = self.hierarchy
        h.base.mkdir(exist_ok=True)
        for name, text in base_files(h.flavour):
            _write(h.base / name, text)
        group = h.group(node)
        group.mkdir(exist_ok=True)
        for name, text in quota_files(h.flavour, cores):
            _write(group / name, text)
        if h.flavour == V1 and (group / V1_TASKS).exists():
            # A worker's accelerator threads add themselves (cpuquota.threads_placed) as
            # the pod's user: v1 lets a task move its own threads where it may write.
            os.chmod(group / V1_TASKS, 0o666)
        return group

    def limit(self, node: str) -> float | None:
        """The cores the node's group is held to now (None: unlimited, or no group)."""
        group = self.hierarchy.group(node)
        if not group.is_dir():
            return None
        files = {n: _read(group / n) or "" for n in quota_file_names(self.hierarchy.flavour)}
        return parse_quota(self.hierarchy.flavour, files)

    def nodes(self) -> list[str]:
        base = self.hierarchy.base
        return sorted(d.name for d in base.iterdir() if d.is_dir()) if base.is_dir() else []

    def pids(self, node: str) -> list[int]:
        return parse_pids(_read(self.hierarchy.group(node) / PROCS) or "")

    def stat(self, node: str) -> dict[str, int]:
        """The group's cpu.stat: periods, throttled periods and time (v2: usage too)."""
        return parse_stat(_read(self.hierarchy.group(node) / "cpu.stat") or "")

    # -- processes ------------------------------------------------------------------------

    def place(self, node: str, pid: int) -> list[int]:
        """Move a container's process into the node's group, and whatever it already
        spawned in its session (children forked later inherit the group). Returns the
        pids moved."""
        procs = self.hierarchy.group(node) / PROCS
        moved = [pid] if _move(procs, pid) else []
        for other in self._session(pid):
            if other != pid and _move(procs, other):
                moved.append(other)
        return moved

    def _session(self, sid: int) -> list[int]:
        found = []
        for d in self._proc.iterdir():
            if d.name.isdigit() and session_of(_read(d / "stat") or "") == sid:
                found.append(int(d.name))
        return found

    def _home(self) -> Path:
        """cgroup.procs of the group this process runs in: where released pids go back
        (the mount root when we run inside one of our own groups)."""
        h = self.hierarchy
        rel = own_group(h.flavour, _read(self._proc / "self" / "cgroup") or "").strip("/")
        home = h.mount / rel
        if home == h.base or h.base in home.parents:
            home = h.mount
        return home / PROCS

    def release(self, node: str, wait_s: float = RELEASE_WAIT_S) -> None:
        """Move what still runs in the node's group back home, then remove the group."""
        group = self.hierarchy.group(node)
        if not group.is_dir():
            return
        home = self._home()
        deadline = time.monotonic() + wait_s
        while True:
            for pid in self.pids(node):
                _move(home, pid)
            try:
                self._rmdir(group)
                return
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise CgroupError(f"cannot remove {group}: {e}") from e
            time.sleep(0.05)

    def release_all(self, keep: Collection[str] = ()) -> list[str]:
        """Remove every node group but `keep`'s, and Cascade's own group once empty.
        Returns the nodes whose groups were removed."""
        gone = [n for n in self.nodes() if n not in keep]
        for node in gone:
            self.release(node)
        base = self.hierarchy.base
        if not keep and base.is_dir():
            with contextlib.suppress(FileNotFoundError):
                self._rmdir(base)
        return gone

    # -- the hierarchy where pods see it (v1: accelerator threads place themselves) --------

    def expose(self, at: Path = EXPOSED) -> Path:
        """Bind-mount the hierarchy at `at` (once; a later call finds it mounted)."""
        if not mounted(at, self._proc):
            self._bind(self.hierarchy.mount, at)
        return at


def bind_mount(source: Path, at: Path) -> None:
    at.mkdir(parents=True, exist_ok=True)
    _mount(["mount", "--bind", str(source), str(at)])


def mounted(at: Path, proc: Path = PROC) -> bool:
    """Whether something is mounted at `at` (this process's mountinfo, field 5)."""
    text = _read(proc / "self" / "mountinfo") or ""
    return any(len(f) > 4 and f[4] == str(at) for f in (line.split() for line in text.splitlines()))


def unexpose(at: Path = EXPOSED, proc: Path = PROC) -> None:
    """Undo `expose` (cascade dev down)."""
    if mounted(at, proc):
        _mount(["umount", str(at)])


def _mount(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CgroupError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
