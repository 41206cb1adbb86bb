"""The bench's cluster I/O: the dev cluster, a namespace with its own operator, one
ModelDeployment per run, its pods, its gateway and its `/scale` subresource.

Cluster: a running `cascade dev` cluster with at least `--nodes` nodes, each with the
`--node-cpu` quota, is used and left running; with none running the bench brings one
up and takes it down at the end; a running one that does not fit is an error (it may
be someone else's: never torn down). The namespace (`cascade-autoscale-XXXXXX`) gets a
`cascade-operator` of its own (as `bench capacity` and `bench scaleup --run-operator`
do) and goes at exit with everything in it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_api import constants as c
from cascade_api.base import ConditionType
from cascade_bench import namespace
from cascade_bench.autoscale.manifest import md_name
from cascade_bench.autoscale.timeline import Sample
from cascade_dev import cluster as devcluster
from cascade_dev import controlplane, processes
from cascade_dev.cpuquota import LABEL_NODE_CPU
from cascade_dev.paths import StatePaths
from cascade_protocol.gateway_load import GATEWAY_LOAD_PATH, GatewayLoad

COMPONENT = "app.kubernetes.io/component"


def _log(msg: str) -> None:
    print(f"bench autoscale: {msg}", file=sys.stderr, flush=True)


def mismatch(cpus: list[float | None], nodes: int, node_cpu: float | None) -> str | None:
    """Why a running cluster with these node quotas cannot host the bench (None: it can)."""
    if len(cpus) < nodes:
        return f"{len(cpus)} nodes, need {nodes}"
    if node_cpu is not None and any(q is None or abs(q - node_cpu) > 1e-9 for q in cpus):
        return f"node CPU quotas {sorted({str(q) for q in cpus})}, need {node_cpu:g}"
    return None


@contextlib.contextmanager
def dev_cluster(paths: StatePaths, nodes: int, node_cpu: float | None) -> Iterator[bool]:
    """A cluster that fits for the block; yields whether the bench brought it up."""
    plan = devcluster.load_plan(paths)
    if processes.running(paths, controlplane.APISERVER) is not None and plan is not None:
        why = mismatch([n.cpu for n in plan.nodes], nodes, node_cpu)
        if why is not None:
            raise RuntimeError(f"a running cluster does not fit ({why}); not tearing it down")
        _log(f"using the running cluster in {paths.root} (left running afterwards)")
        yield False
        return
    _log(f"bringing up {nodes} nodes at {node_cpu} core each")
    try:
        devcluster.up(paths, devcluster.UpOptions(nodes=nodes, node_cpu=node_cpu))
        yield True
    finally:
        _log("taking the cluster down")
        devcluster.down(paths)


@dataclass(frozen=True)
class NodeFacts:
    gpus: int  # the smallest nvidia.com/gpu allocatable: an instance asking this gets a node
    cpu: float | None  # the nodes' quota label (None: unlimited or mixed)


class Bench:
    """One namespace, its operator, and the run's ModelDeployment (client calls only)."""

    def __init__(self, core: Any, custom: Any, ns: str) -> None:
        self.core, self.custom, self.ns = core, custom, ns

    def nodes(self) -> NodeFacts:
        items = self.core.list_node().items
        gpus = [int((n.status.allocatable or {}).get(c.GPU_RESOURCE, "0")) for n in items]
        cpus = {str((n.metadata.labels or {}).get(LABEL_NODE_CPU)) for n in items}
        label = next(iter(cpus)) if len(cpus) == 1 else "mixed"
        try:
            cpu: float | None = float(label)
        except ValueError:  # "None", "none", "mixed": no single quota
            cpu = None
        return NodeFacts(min(gpus, default=0), cpu)

    def create(self, body: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(c.GROUP, c.VERSION, self.ns, c.MD_PLURAL, body)

    def delete(self, run: str, timeout_s: float = 180.0) -> None:
        """Delete the run's ModelDeployment and wait until its pods are gone (their nodes
        and quota are free for the next run)."""
        from kubernetes.client.exceptions import ApiException

        name = md_name(run)
        with contextlib.suppress(ApiException):
            self.custom.delete_namespaced_custom_object(
                c.GROUP, c.VERSION, self.ns, c.MD_PLURAL, name
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pods = self.core.list_namespaced_pod(
                self.ns, label_selector=f"{c.LABEL_DEPLOYMENT}={name}"
            ).items
            if not pods:
                return
            time.sleep(1.0)
        _log(f"{name}: pods still there after {timeout_s:.0f} s")

    def replicas(self, run: str) -> int:
        md = self.custom.get_namespaced_custom_object(
            c.GROUP, c.VERSION, self.ns, c.MD_PLURAL, md_name(run)
        )
        return int(md["spec"].get("replicas", 0))

    def wait_host_copies(self, run: str, timeout_s: float) -> int:
        """Wait until the run's host copies (spec.hostCopies) hold the model; how many."""
        deadline = time.monotonic() + timeout_s
        while True:
            md = self.custom.get_namespaced_custom_object(
                c.GROUP, c.VERSION, self.ns, c.MD_PLURAL, md_name(run)
            )
            want = int(md["spec"].get("hostCopies", 1))
            shown = (md.get("status") or {}).get("hostCopies") or []
            if sum(1 for h in shown if h.get("ready")) >= want:
                return want
            if time.monotonic() > deadline:
                raise TimeoutError(f"{md_name(run)}: {want} host copies not ready in {timeout_s} s")
            time.sleep(1.0)

    def scale(self, run: str, replicas: int) -> None:
        self.custom.patch_namespaced_custom_object_scale(
            c.GROUP,
            c.VERSION,
            self.ns,
            c.MD_PLURAL,
            md_name(run),
            {"spec": {"replicas": replicas}},
        )

    def _pods(self, run: str, component: str) -> list[Any]:
        sel = f"{c.LABEL_DEPLOYMENT}={md_name(run)},{COMPONENT}={component}"
        return list(self.core.list_namespaced_pod(self.ns, label_selector=sel).items)

    def sample(self, run: str, t: float) -> tuple[Sample, dict[str, str]]:
        """The run's worker pods now, and {uid: node} of those that exist."""
        pods = self._pods(run, c.COMPONENT_WORKER)
        ready, starting, terminating, names = 0, 0, 0, []
        for p in pods:
            if p.metadata.deletion_timestamp:
                terminating += 1
            elif pod_ready(p):
                ready += 1
                names.append(p.metadata.uid)
            else:
                starting += 1
        nodes = {p.metadata.uid: p.spec.node_name or "" for p in pods}
        s = Sample(t, self.replicas(run), len(pods), ready, starting, terminating, tuple(names))
        return s, nodes

    def gateway_url(self, run: str) -> str | None:
        for p in self._pods(run, c.COMPONENT_GATEWAY):
            if pod_ready(p) and p.status.pod_ip and not p.metadata.deletion_timestamp:
                return f"http://{p.status.pod_ip}:{c.GATEWAY_PORT}"
        return None

    def wait_ready(self, run: str, n: int, timeout_s: float) -> str:
        """Wait for n Ready workers and a gateway that routes to them; its URL."""
        deadline = time.monotonic() + timeout_s
        while True:
            url = self.gateway_url(run)
            if url is not None:
                load = gateway_load(url)
                if load is not None and load.backends_ready >= n:
                    return url
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{md_name(run)}: {n} ready backends not seen in {timeout_s} s"
                    + self._degraded(run)
                )
            time.sleep(1.0)

    def _degraded(self, run: str) -> str:
        """'; Degraded: <message>' when the operator says why the run cannot get ready."""
        md = self.custom.get_namespaced_custom_object(
            c.GROUP, c.VERSION, self.ns, c.MD_PLURAL, md_name(run)
        )
        for cond in md.get("status", {}).get("conditions", []):
            if cond.get("type") == ConditionType.DEGRADED and cond.get("status") == "True":
                return f"; Degraded: {cond.get('message', '')}"
        return ""


def pod_ready(pod: Any) -> bool:
    conds = pod.status.conditions or []
    return any(k.type == "Ready" and k.status == "True" for k in conds)


def gateway_load(url: str, timeout_s: float = 2.0) -> GatewayLoad | None:
    """The gateway's load report, or None when it does not answer."""
    try:
        with urllib.request.urlopen(url + GATEWAY_LOAD_PATH, timeout=timeout_s) as resp:
            return GatewayLoad.model_validate(json.loads(resp.read()))
    except (OSError, ValueError):
        return None


def concurrency(load: GatewayLoad) -> int:
    """In flight plus queued (held included), both classes: what the KPA counts."""
    return sum(cl.in_flight + cl.queued for cl in load.classes.values())


@contextlib.contextmanager
def bench_namespace(kubeconfig: Path) -> Iterator[Bench]:
    """A fresh namespace with its own operator; both removed at exit."""
    with namespace.bench_namespace(kubeconfig, "cascade-autoscale", _log) as n:
        yield Bench(*n)
