"""The I/O half of `cascade dev up` as a reconcile: read what runs, carry out the diff.

`clusterdiff` decides; this module reads the running cluster into its `Current` and
does the parts of the `Change`s that are not the fabric's (`netlinks.ensure_switches`
re-shapes, adds and prunes links) or the agent restart's (cluster.up). A surplus node
goes as a node leaving a real cluster does: cordoned, its pods deleted gracefully so its
agent stops them (forced once the timeout passes), and only then, with the restarted
agent no longer heartbeating it, its Node and Lease deleted. Labels are patched here,
not left to the restarted agent, so they are right when `up` returns.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Any

from cascade_dev import cgroups, netlinks
from cascade_dev.clusterdiff import Change, CpuQuota, Current, NodeRemoved, Relabeled
from cascade_dev.kubeapi import KubeApi
from cascade_dev.topology import MODE_NETNS, ClusterPlan

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
FORCE_AFTER_S = 60.0  # a drain waits at most this long for graceful pod ends


def observe(api: KubeApi, plan: ClusterPlan | None, mode: str) -> Current:
    """What runs now: `plan` is the cluster.json the node agent was started on."""
    labels = {
        str(n["metadata"]["name"]): dict(n["metadata"].get("labels") or {})
        for n in api.get("/api/v1/nodes").get("items", [])
    }
    netns = mode == MODE_NETNS
    cg = cgroups.CpuCgroups.detect()
    cpu = None if cg is None else {node: cg.limit(node) for node in cg.nodes()}
    return Current(
        plan=plan,
        labels=labels,
        links=frozenset(netlinks.switch_links()) if netns else frozenset(),
        rates=netlinks.tbf_rates() if netns else {},
        cpu=cpu,
    )


def _pods_on(api: KubeApi, node: str) -> list[dict[str, Any]]:
    selector = urllib.parse.quote(f"spec.nodeName={node}")
    items: list[dict[str, Any]] = api.get(f"/api/v1/pods?fieldSelector={selector}")["items"]
    return items


def _pod_path(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    return f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"


def drain(api: KubeApi, changes: Sequence[Change], agent_running: bool, timeout: float) -> None:
    """Cordon every removed node and delete its pods: gracefully where the running agent
    serves the node (it stops them and confirms), at once where nothing would."""
    removed = [c for c in changes if isinstance(c, NodeRemoved)]
    for ch in removed:
        status, _ = api.request("GET", f"/api/v1/nodes/{ch.name}")
        if status == 200:
            api.patch(f"/api/v1/nodes/{ch.name}", {"spec": {"unschedulable": True}})
    graceful = {c.name for c in removed if c.served and agent_running}
    for ch in removed:
        suffix = "" if ch.name in graceful else "?gracePeriodSeconds=0"
        for pod in _pods_on(api, ch.name):
            api.delete(_pod_path(pod) + suffix)
    deadline = time.monotonic() + min(timeout, FORCE_AFTER_S)
    while graceful and time.monotonic() < deadline:
        graceful = {n for n in graceful if _pods_on(api, n)}
        time.sleep(0.5)
    for node in graceful:
        for pod in _pods_on(api, node):
            api.delete(_pod_path(pod) + "?gracePeriodSeconds=0")


def apply_quotas(changes: Iterable[Change]) -> None:
    """Set, change or lift nodes' CPU quotas now (running pods included); the restarted
    agent finds them right. Removed nodes' groups go once their pods are gone."""
    todo = [c for c in changes if isinstance(c, CpuQuota | NodeRemoved)]
    cg = cgroups.CpuCgroups.detect()
    if cg is None or not todo:
        return
    have = set(cg.nodes())
    for ch in todo:
        node = ch.node if isinstance(ch, CpuQuota) else ch.name
        if isinstance(ch, CpuQuota) and ch.new is not None:
            cg.ensure(node, ch.new)
        elif node in have:
            cg.release(node)


def finish(api: KubeApi, changes: Iterable[Change]) -> None:
    """After the agent runs the new plan: delete removed Nodes (and their Leases, which
    the garbage collector would take later), and patch changed labels."""
    for ch in changes:
        if isinstance(ch, NodeRemoved):
            api.delete(f"/api/v1/nodes/{ch.name}")
            api.delete(f"{LEASES}/{ch.name}")
        elif isinstance(ch, Relabeled):
            api.patch(f"/api/v1/nodes/{ch.node}", ch.patch())
