"""The local cluster the benchmark runs on: reuse a matching one, or bring one up and down.

Only one local cluster can run at a time (fixed ports, global `cx*` links), and another
session may be testing on it. So: a running cluster with enough nodes at the requested NIC
rate is used as it is and left running; a different one is waited for, never torn down;
with none running, the benchmark brings its own up and takes it down at the end.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from cascade_dev import cluster as devcluster
from cascade_dev import controlplane, processes
from cascade_dev.paths import APISERVER_PORT, StatePaths
from cascade_dev.topology import MODE_NETNS, ClusterPlan

RETRY_S = 15.0


@dataclass(frozen=True)
class Want:
    nodes: int
    nic_mbit: int
    spine_mbit: int | None
    nodes_per_leaf: int
    mtu: int


def mismatch(plan: ClusterPlan, want: Want) -> str | None:
    """Why a running cluster cannot host this benchmark (None: it can)."""
    if plan.mode != MODE_NETNS:
        return f"fabric is {plan.mode}, the benchmark needs netns (root) shaping"
    if len(plan.nodes) < want.nodes:
        return f"{len(plan.nodes)} nodes, need {want.nodes}"
    rates = {(n.nic_in_mbit, n.nic_out_mbit) for n in plan.nodes[: want.nodes]}
    if rates != {(want.nic_mbit, want.nic_mbit)}:
        return f"NIC rates {sorted(rates)} Mbit/s, need {want.nic_mbit}"
    if plan.mtu != want.mtu:
        return f"MTU {plan.mtu}, need {want.mtu}"
    return None


def _port_busy(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def fabric_cluster(paths: StatePaths, want: Want, wait_s: float) -> Iterator[ClusterPlan]:
    """A cluster with `want.nodes` shaped nodes for the duration of the block."""
    deadline = time.monotonic() + wait_s
    while True:
        plan = devcluster.load_plan(paths)
        ours_up = processes.running(paths, controlplane.APISERVER) is not None
        if ours_up and plan is not None:
            why = mismatch(plan, want)
            if why is None:
                _log(f"using the running cluster in {paths.root} (left running afterwards)")
                yield plan
                return
            busy = f"a running cluster does not fit ({why})"
        elif _port_busy(APISERVER_PORT):
            busy = f"port {APISERVER_PORT} is taken (a cluster from another state dir?)"
        else:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{busy}; gave up after {wait_s:.0f}s (not tearing it down)")
        _log(f"{busy}; waiting {RETRY_S:.0f}s")
        time.sleep(RETRY_S)
    opts = devcluster.UpOptions(
        nodes=want.nodes,
        nic_mbit=want.nic_mbit,
        spine_mbit=want.spine_mbit,
        nodes_per_leaf=want.nodes_per_leaf,
        fabric=MODE_NETNS,
        mtu=want.mtu,
    )
    _log(f"bringing up a {want.nodes}-node cluster at {want.nic_mbit} Mbit/s, MTU {want.mtu}")
    try:
        plan = devcluster.up(paths, opts)
        yield plan
    finally:
        _log("taking the cluster down")
        devcluster.down(paths)
