"""One benchmark pod (network namespace) per simulated node, outside the API server.

The fabric gives any caller a namespace on a node's shaped NIC (`attach_pod`); the
benchmark takes one per node for the whole run and returns them all on exit, Ctrl-C
included. Names are short and carry our pid, so parallel runs cannot collide.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cascade_dev.fabric import Fabric, PodNet


@dataclass(frozen=True)
class BenchPod:
    name: str  # pod name used in plans and peer maps
    node: str  # simulated node it sits on
    leaf: str  # the node's leaf switch (for topology-aware plans)
    uid: str
    net: PodNet
    prefix: tuple[str, ...]  # command prefix that runs a process inside the pod's netns


def pod_uid(index: int, pid: int | None = None) -> str:
    """12 significant characters (the fabric keys namespaces on those)."""
    return f"bx{(os.getpid() if pid is None else pid) % 1_000_000:06d}n{index:03d}"


def pod_name(index: int) -> str:
    return f"bench-{index}"


@contextlib.contextmanager
def bench_pods(fabric: Fabric, nodes: Sequence[str]) -> Iterator[list[BenchPod]]:
    """Attach a pod on each node (in order); detach every one of them on exit."""
    attached: list[BenchPod] = []
    uids: list[str] = []  # before attaching, so a half-plumbed pod is removed too
    try:
        for i, node in enumerate(nodes):
            uids.append(pod_uid(i))
            net = fabric.attach_pod(node, uids[-1])
            prefix = tuple(fabric.exec_prefix(net))
            leaf = fabric.plan.node(node).leaf
            attached.append(BenchPod(pod_name(i), node, leaf, uids[-1], net, prefix))
        yield attached
    finally:
        for uid in uids:
            with contextlib.suppress(Exception):
                fabric.detach_pod(uid)
            with contextlib.suppress(OSError):
                fabric.paths.pod_dir(uid).rmdir()
