"""The node agent's side of `--node-cpu`: each node's group at start, pods put into it.

The quota comes from cluster.json (the same value `cascade dev up` wrote into the node's
`cascade.dev/node-cpu` label). `apply` runs once when the agent starts: it makes or
updates the group of every quota'd node and removes the groups of nodes that lost their
quota or left the cluster, moving what ran in them back out. `confine` runs right after
a container's process is spawned, or, for a container with a readiness probe, when that
probe first passes (`cpuquota.confined_from_ready`: start-up runs at host speed, serving
under the quota); and for each process a restarted agent re-adopts, so a quota set by a
later `up` reaches pods that were already running. What a confined process forks
afterwards inherits the group. `env` sizes its thread pools to the quota from the start.

Failures never stop a pod: a process that could not be placed runs unconfined and the
agent logs why (`cascade dev up` refuses --node-cpu where groups cannot be made at all).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_api import constants as c
from cascade_dev.cgroups import EXPOSED, CgroupError, CpuCgroups
from cascade_dev.cpuquota import (
    ACCELERATOR_TASKS_ENV,
    V1,
    V1_TASKS,
    Hierarchy,
    component,
    confined,
    thread_env,
    threads_placed,
)

log = logging.getLogger(__name__)


class NodeCpu:
    """CPU quotas of the agent's nodes and the groups that enforce them."""

    def __init__(
        self,
        quotas: Mapping[str, float | None],
        cgroups: CpuCgroups | None,
        exposed: Path = EXPOSED,
    ) -> None:
        self.quotas = {node: cores for node, cores in quotas.items() if cores is not None}
        self._cgroups = cgroups
        # Where pods see the node groups when accelerator threads place themselves (v1,
        # the hierarchy exposed by `apply`); None: whole processes are confined.
        self._seen: Hierarchy | None = None
        self._exposed = exposed

    def apply(self) -> None:
        """Make the groups match the quotas (called once, before any pod starts)."""
        cg = self._cgroups
        if cg is None:
            if self.quotas:
                log.error("no cgroup cpu controller on this host: pods run without CPU quota")
            return
        problem = cg.problem()
        if problem is not None:
            if self.quotas:
                log.error("pods run without CPU quota: %s", problem)
            self._cgroups = None
            return
        try:
            for node, cores in sorted(self.quotas.items()):
                group = cg.ensure(node, cores)
                log.info("node %s: pods limited to %g core(s) in %s", node, cores, group)
            for node in cg.release_all(keep=self.quotas):
                log.info("node %s: CPU quota lifted, group removed", node)
        except (OSError, CgroupError) as e:
            log.error("CPU quota groups: %s; pods run without CPU quota", e)
            self._cgroups = None
            return
        if self.quotas and cg.hierarchy.flavour == V1:
            try:
                self._seen = Hierarchy(V1, cg.expose(self._exposed))
            except (OSError, CgroupError) as e:
                log.warning("workers' processes confined whole: cannot expose %s: %s", cg, e)

    def env(self, node: str, pod: Mapping[str, Any]) -> dict[str, str]:
        """Extra environment of a pod that the node's quota will hold (none otherwise):
        thread pools sized to the quota, and where its accelerator threads go when
        threads are placed one by one (`cpuquota.threads_placed`)."""
        cores, cg = self.quotas.get(node), self._cgroups
        if cores is None or cg is None or not confined(pod):
            return {}
        env = thread_env(cores, os.cpu_count() or 1)
        # A worker's accelerator threads place themselves (a host copy has none).
        if self._seen is not None and component(pod) == c.COMPONENT_WORKER:
            env[ACCELERATOR_TASKS_ENV] = str(self._seen.group(node) / V1_TASKS)
        return env

    def confine(self, node: str, pod: Mapping[str, Any], pid: int) -> None:
        """Put a freshly spawned (or re-adopted) container process in its node's group
        (unless its accelerator threads place themselves, or it has none)."""
        cg = self._cgroups
        if cg is None or node not in self.quotas or not confined(pod):
            return
        if self._seen is not None and threads_placed(self._seen.flavour, pod):
            return
        try:
            moved = cg.place(node, pid)
        except OSError as e:
            log.warning("node %s: could not put pid %d under its CPU quota: %s", node, pid, e)
            return
        log.debug("node %s: pids %s under its CPU quota", node, moved)
