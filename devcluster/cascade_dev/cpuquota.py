"""CPU quotas for simulated nodes: which cgroup, what to write in it, whom it holds (pure).

On a GPU cluster every instance brings its own accelerator, so two instances serve about
twice what one does. Here every simulated node shares the machine's few cores, so
`cascade dev up --node-cpu CORES` gives each node a CFS bandwidth quota instead: its
worker pods run in one cgroup per node that may use CORES cores' worth of CPU time per
period, and capacity scales with nodes the way it does with GPUs.

One group per node, not per pod: the quota is a property of the node (its label
`cascade.dev/node-cpu`, like its NIC rate), so it is created once when the node agent
starts and every pod the scheduler binds to the node shares it, as pods share a node's
hardware; a bench cannot gain capacity by packing more pods onto a node, and there is
no group to create or remove per pod start and teardown. Control-plane pods (operator,
gateway: `app.kubernetes.io/component`) stay outside, as they would not run on the GPU.

Layout: `<mount>/cascade-dev/<node>`, where the mount is the cgroup v1 `cpu` hierarchy
(`/sys/fs/cgroup/cpu`: `cpu.cfs_period_us`, `cpu.cfs_quota_us`) or the cgroup v2 root
(`/sys/fs/cgroup` whose `cgroup.controllers` lists cpu: `cpu.max`). Nothing is ever
written to the root group. Everything here is text in, text out: `cascade_dev.cgroups`
does the reads and writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_api import constants as c

LABEL_NODE_CPU = f"{c.GROUP}/node-cpu"
V1 = "v1"
V2 = "v2"
PERIOD_US = 100_000
# The kernel refuses a v1 quota under 1 ms; 0.01 core is 1 ms per 100 ms period.
MIN_CORES = 0.01
GROUP_ROOT = "cascade-dev"
PROCS = "cgroup.procs"
V1_PERIOD = "cpu.cfs_period_us"
V1_QUOTA = "cpu.cfs_quota_us"
V2_MAX = "cpu.max"
V2_SUBTREE = "cgroup.subtree_control"
V2_CONTROLLERS = "cgroup.controllers"
# Pods that would not run on a GPU node's accelerator: never held to a node's quota.
UNCONFINED_COMPONENTS = frozenset({"operator", c.COMPONENT_GATEWAY})
ACCELERATOR_TASKS_ENV = c.ACCELERATOR_TASKS_ENV  # v1: where accelerator threads go
V1_TASKS = "tasks"
# Pods that run no accelerator work: nothing of theirs is held to the quota where
# threads can be placed (a host copy holds blocks in host memory and sends them).
HOST_ONLY_COMPONENTS = frozenset({c.COMPONENT_HOST_COPY})


@dataclass(frozen=True)
class Hierarchy:
    """The cpu controller's hierarchy on this host: its flavour and where it is mounted."""

    flavour: str  # V1 | V2
    mount: Path  # /sys/fs/cgroup/cpu (v1) or /sys/fs/cgroup (v2)

    @property
    def base(self) -> Path:
        """The one group Cascade owns; nodes' groups are its children."""
        return self.mount / GROUP_ROOT

    def group(self, node: str) -> Path:
        if not node or "/" in node or node in (".", ".."):
            raise ValueError(f"not a node name for a cgroup: {node!r}")
        return self.base / node


def flavour_of(v2_controllers: str | None, v1_has_cfs: bool) -> str | None:
    """v2 when the unified root offers cpu (a pure v2 host), else v1 when the v1 cpu
    hierarchy has CFS bandwidth files, else None (no usable cpu controller)."""
    if v2_controllers is not None and "cpu" in v2_controllers.split():
        return V2
    return V1 if v1_has_cfs else None


def check_cores(cores: float) -> float:
    """`--node-cpu` as given, or ValueError saying why not."""
    if not math.isfinite(cores) or cores < MIN_CORES:
        raise ValueError(f"--node-cpu must be a number of cores >= {MIN_CORES}, got {cores}")
    return cores


def quota_us(cores: float) -> int:
    return round(check_cores(cores) * PERIOD_US)


def format_cores(cores: float) -> str:
    """The label value: shortest text that reads back as the same number ("0.25", "2")."""
    return format(cores, "g")


def parse_cores(value: object) -> float | None:
    """A label or cluster.json value back to cores; None when unset or not a valid quota."""
    if value is None or value == "":
        return None
    try:
        return check_cores(float(str(value)))
    except ValueError:
        return None


def quota_file_names(flavour: str) -> tuple[str, ...]:
    """The files that hold a group's quota."""
    return (V1_PERIOD, V1_QUOTA) if flavour == V1 else (V2_MAX,)


def quota_files(flavour: str, cores: float | None) -> list[tuple[str, str]]:
    """(file, text) to write into a node's group, in order; None lifts the limit.

    v1 writes the period before the quota so the pair is never briefly invalid."""
    if flavour == V1:
        quota = str(quota_us(cores)) if cores is not None else "-1"
        return [(V1_PERIOD, str(PERIOD_US)), (V1_QUOTA, quota)]
    if flavour == V2:
        quota = str(quota_us(cores)) if cores is not None else "max"
        return [(V2_MAX, f"{quota} {PERIOD_US}")]
    raise ValueError(f"unknown cgroup flavour {flavour!r}")


def base_files(flavour: str) -> list[tuple[str, str]]:
    """(file, text) for Cascade's own group before any node group: v2 must hand the cpu
    controller down to its children; v1 groups all have every file already."""
    return [(V2_SUBTREE, "+cpu")] if flavour == V2 else []


def v2_root_delegates_cpu(root_subtree_control: str) -> bool:
    """A v2 child of the root only has cpu.max when the root enables cpu for its children;
    turning it on would change the root group, which we never do."""
    return "cpu" in root_subtree_control.split()


def parse_quota(flavour: str, files: Mapping[str, str]) -> float | None:
    """Cores a group is limited to, from its files' text (None: unlimited)."""
    if flavour == V1:
        quota, period = int(files[V1_QUOTA]), int(files[V1_PERIOD])
    else:
        q, p = files[V2_MAX].split()
        if q == "max":
            return None
        quota, period = int(q), int(p)
    return None if quota < 0 else quota / period


def component(pod: Mapping[str, Any]) -> str | None:
    """The pod's `app.kubernetes.io/component` (worker, host-copy, gateway, ...)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    value = labels.get(c.LABEL_COMPONENT)
    return str(value) if value is not None else None


def confined(pod: Mapping[str, Any]) -> bool:
    """Whether a pod's processes belong in its node's group: all but the control plane."""
    return component(pod) not in UNCONFINED_COMPONENTS


def threads_placed(flavour: str, pod: Mapping[str, Any]) -> bool:
    """Whether the quota holds only a pod's accelerator threads instead of its processes.

    The quota stands for the node's GPU. A worker's engine step and pipeline stage
    compute run on it; receiving and forwarding blocks, HTTP and the pipeline's wire run
    on the host's cores beside it. Confining the whole process charged the transport to
    the "GPU": a source serving while it sends, or a target serving while it forwards,
    moved blocks only when its engine left it CPU (bench burst run 2: live transfers took
    18.0 s against 8.9 s). cgroup v1 places single threads (`tasks`), so there the worker's
    compute threads put themselves in the group (`ACCELERATOR_TASKS_ENV`); v2 places a
    thread apart from its process only in threaded subtrees, so there the whole process
    is confined as before."""
    return flavour == V1 and component(pod) in {c.COMPONENT_WORKER, *HOST_ONLY_COMPONENTS}


def confined_from_ready(container: Mapping[str, Any]) -> bool:
    """Whether a container joins its node's group only once it is first Ready.

    The quota stands for the node's accelerator: what an instance serves with. Its
    start-up (interpreter, imports, weight transfer) runs on a GPU node's host cores, at
    full speed; under the quota a tiny model's start-up took 15-22 s, 10-15 of them
    importing torch and ucxx at 0.2 core. (The engine build is the accelerator's: where
    threads are placed, the worker builds on a thread in the group, accelerator.py.) So
    a container with a readiness probe (it says when it serves) runs unconfined until
    that probe first passes; one without is confined at once, as before."""
    return bool(container.get("readinessProbe"))


def thread_env(cores: float, cpus: int) -> dict[str, str]:
    """Environment that sizes a confined process's thread pools to its node's quota
    (floor(cores), at least 1, at most the host's cores), as the process would itself if
    it could read the quota at start: it starts before it is confined."""
    return {"OMP_NUM_THREADS": str(max(1, min(cpus, math.floor(cores))))}


def own_group(flavour: str, proc_cgroup: str) -> str:
    """The group path (relative to the hierarchy's mount) a process sits in, from its
    /proc/PID/cgroup text: the `0::` line in v2, the line listing `cpu` in v1."""
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if (flavour == V2 and parts[0] == "0" and controllers == "") or (
            flavour == V1 and "cpu" in controllers.split(",")
        ):
            return path.strip() or "/"
    return "/"


def session_of(stat: str) -> int | None:
    """The session id in a /proc/PID/stat line (field 6), None if it cannot be read.
    Containers start in their own session, so a container's processes share its pid."""
    fields = stat[stat.rfind(")") + 2 :].split()  # from field 3 (state) on
    try:
        return int(fields[3])
    except (IndexError, ValueError):
        return None


def parse_pids(procs: str) -> list[int]:
    """The pids a cgroup.procs file lists."""
    return [int(p) for p in procs.split() if p.isdigit()]


def parse_stat(text: str) -> dict[str, int]:
    """cpu.stat as numbers: v1 nr_periods/nr_throttled/throttled_time (ns), v2 adds
    usage_usec and throttled_usec."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out
