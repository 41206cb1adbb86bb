"""Size torch's CPU thread pool to this process's CPU limit (its cgroup quota).

torch starts one intra-op thread per visible core. Under a CFS quota smaller than the
core count (a container's `resources.limits.cpu`, or a `cascade dev` node's quota) the
extra threads buy nothing: together they spend the period's quota sooner and then every
one of them is throttled until the next period, so each step waits a whole period more.
Measured on tiny-llama at a 0.2-core quota on a 2-core host: a 512-token prefill takes
906 ms with 2 threads and 383 ms with 1, a batch-32 decode step 100 ms and 9 ms (median).
Go's automaxprocs and the JVM's container support make the same correction.

So the engine uses floor(quota) threads (at least 1, at most the visible cores) when a
quota applies, unless OMP_NUM_THREADS says otherwise (an operator's explicit choice
wins). The limit is the tightest quota on the path from the process's own group to the
root: a child group cannot use more than its parents allow. On a GPU the thread pool
does not matter much; this keeps CPU runs (CI, the dev cluster) honest.

Pure parsing here (`quota_cores`, `threads_for`); `apply` does the reads.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_DIRS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")  # how distributions mount the v1 cpu controller


def own_groups(proc_cgroup: str) -> tuple[str | None, str | None]:
    """(v2 path, v1 cpu path) of a process, from its /proc/self/cgroup text."""
    v2 = v1 = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            v2 = path.strip() or "/"
        elif "cpu" in controllers.split(","):
            v1 = path.strip() or "/"
    return v2, v1


def ancestry(path: str) -> list[str]:
    """A group and its parents up to (not including) the root: '/a/b' -> ['a/b', 'a']."""
    parts = PurePosixPath(path).parts[1:]
    return ["/".join(parts[:i]) for i in range(len(parts), 0, -1)]


def v2_cores(cpu_max: str) -> float | None:
    """cores allowed by a v2 `cpu.max` ("max 100000" or "20000 100000")."""
    fields = cpu_max.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    quota, period = int(fields[0]), int(fields[1])
    return quota / period if quota > 0 and period > 0 else None


def v1_cores(quota_us: str, period_us: str) -> float | None:
    """cores allowed by v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1: unlimited)."""
    quota, period = int(quota_us.strip()), int(period_us.strip())
    return quota / period if quota > 0 and period > 0 else None


def quota_cores(
    proc_cgroup: str, read: Callable[[Path], str | None], root: Path = CGROUP_ROOT
) -> float | None:
    """The tightest CPU quota over this process's group and its ancestors; None: none."""
    v2, v1 = own_groups(proc_cgroup)
    limits: list[float] = []
    if v2 is not None:
        for group in ancestry(v2):
            text = read(root / group / "cpu.max")
            cores = v2_cores(text) if text else None
            limits += [cores] if cores else []
    if v1 is not None:
        for mount in V1_DIRS:
            for group in ancestry(v1):
                quota = read(root / mount / group / "cpu.cfs_quota_us")
                period = read(root / mount / group / "cpu.cfs_period_us")
                cores = v1_cores(quota, period) if quota and period else None
                limits += [cores] if cores else []
    return min(limits) if limits else None


def threads_for(quota: float | None, cpus: int) -> int:
    """Intra-op threads for a quota of `quota` cores on `cpus` visible cores."""
    if quota is None:
        return max(1, cpus)
    return max(1, min(cpus, math.floor(quota)))


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, ValueError):
        return None


def own_quota_cores() -> float | None:
    """This process's tightest CPU quota in cores; None: none applies."""
    return quota_cores(_read(Path("/proc/self/cgroup")) or "", _read)


def apply() -> int | None:
    """Set torch's intra-op threads from the quota; the count set, None if left alone."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    quota = own_quota_cores()
    if quota is None:
        return None
    import torch

    n = threads_for(quota, os.cpu_count() or 1)
    if n != torch.get_num_threads():
        log.info(
            "CPU quota %.2f cores: torch intra-op threads %d -> %d",
            quota,
            torch.get_num_threads(),
            n,
        )
        torch.set_num_threads(n)
    return n
