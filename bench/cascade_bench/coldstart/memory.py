"""How much memory a pod holds, read from its processes (the dev cluster's pods are
local processes).

Why not the blocks a host copy reports: bytes held = blocks x block size is what the
copy packed, true by construction, and says nothing of what the node pays (Python, the
transport's buffers, a second copy made by mistake). The dev cluster's node agent runs
each container as one process in its own session and names it `cascade://<pid>` in the
pod's containerID, so a pod's resident memory is the VmRSS of every process in those
sessions (children included: whatever the container spawned). Shared pages are counted
in each process that maps them, as `ps` does. Another runtime's containerID is not
readable here: that pod is unmeasured (None), never estimated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from cascade_dev.cpuquota import session_of

PROC = Path("/proc")
PREFIX = "cascade://"


def container_pid(container_id: str | None) -> int | None:
    """The pid in a dev-cluster containerID (None: another runtime, or not started)."""
    if not container_id or not container_id.startswith(PREFIX):
        return None
    tail = container_id.removeprefix(PREFIX)
    return int(tail) if tail.isdigit() else None


def vm_rss_bytes(status: str) -> int | None:
    """VmRSS of a /proc/PID/status text, in bytes (None: a kernel thread has none)."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # the process exited between listing and reading
        return None


def _sessions(proc: Path, wanted: set[int]) -> dict[int, list[int]]:
    """{session id: its pids} for the sessions in `wanted`, from one pass over /proc."""
    found: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _read(entry / "stat")
        sid = session_of(stat) if stat is not None else None
        if sid in wanted:
            found.setdefault(sid, []).append(int(entry.name))
    return found


def _session_rss(proc: Path, pids: Iterable[int]) -> int:
    return sum(vm_rss_bytes(_read(proc / str(p) / "status") or "") or 0 for p in pids)


def pods_rss_bytes(
    pods: Mapping[str, Sequence[str | None]], proc: Path = PROC
) -> dict[str, int | None]:
    """Resident bytes of each pod ({name: its containers' IDs}); None for a pod none of
    whose containers could be read (another runtime, or its processes gone)."""
    pids = {
        name: [p for c in ids if (p := container_pid(c)) is not None] for name, ids in pods.items()
    }
    sessions = _sessions(proc, {p for ps in pids.values() for p in ps})
    out: dict[str, int | None] = {}
    for name, leaders in pids.items():
        live = [sessions[p] for p in leaders if p in sessions]
        out[name] = sum(_session_rss(proc, s) for s in live) if live else None
    return out


def total(measured: Mapping[str, int | None], names: Iterable[str]) -> int | None:
    """The sum over `names` (0 for none); None when any of them was not measured."""
    got = [measured.get(n) for n in names]
    return None if any(v is None for v in got) else sum(v or 0 for v in got)
