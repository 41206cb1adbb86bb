"""The bench's view of the cluster: one ModelDeployment in a namespace of its own.

The bench needs a running `cascade dev up --nodes 3 --node-cpu C` cluster (it does not
start or stop one: the quota is the cluster's, and the same cluster serves other runs).
It applies the CRDs generated from `cascade_api`, makes a fresh namespace, starts a
`cascade-operator` watching only that namespace (as `bench scaleup --run-operator`
does), creates the ModelDeployment with the engine's max batch raised to the largest
batch measured, and reads back what the measurement needs: each Ready worker's pod IP
and node, and that node's `cascade.dev/node-cpu` label. Two instances must sit on two
nodes, or the second adds no quota. The scheduler does not spread the operator's bare
pods (measured: both landed on one node), and `instance.nodeSelector` is one selector for
every instance, so the bench cordons the nodes that hold instances while the next is
scheduled (`spread`), uncordons them after, and still checks `spec.nodeName`. Everything
it made goes at exit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_api import constants as c
from cascade_bench.namespace import bench_namespace
from cascade_bench.worker_auth import authorize
from cascade_dev.cpuquota import LABEL_NODE_CPU

NAME = "capacity"


@dataclass(frozen=True)
class Worker:
    pod: str
    node: str
    ip: str
    node_cpu: float | None  # the node's quota in cores; None: unlimited

    @property
    def generate_url(self) -> str:
        return f"http://{self.ip}:{c.WORKER_PORT}/v1/generate"


class Deployment:
    """The bench's ModelDeployment and its workers (kubernetes client calls only)."""

    def __init__(self, core: Any, custom: Any, ns: str) -> None:
        self.core, self.custom, self.ns = core, custom, ns

    def create(self, model_path: Path, max_batch: int) -> None:
        md = {
            "apiVersion": c.API_VERSION,
            "kind": c.MD_KIND,
            "metadata": {"name": NAME, "namespace": self.ns},
            "spec": {
                "model": {"uri": f"file://{model_path}"},
                "replicas": 1,
                # The curve is measured at fixed batch sizes: no local autoscaler moving it.
                "engine": {"maxBatchSize": max_batch, "adaptiveBatch": False},
            },
        }
        self.custom.create_namespaced_custom_object(c.GROUP, c.VERSION, self.ns, c.MD_PLURAL, md)

    def delete(self, timeout_s: float = 60.0) -> None:
        """Delete the ModelDeployment and wait until the operator has let it go."""
        from kubernetes.client.exceptions import ApiException

        args = (c.GROUP, c.VERSION, self.ns, c.MD_PLURAL, NAME)
        deadline = time.monotonic() + timeout_s
        try:
            self.custom.delete_namespaced_custom_object(*args)
            while time.monotonic() < deadline:
                self.custom.get_namespaced_custom_object(*args)
                time.sleep(0.5)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def scale(self, replicas: int) -> None:
        self.custom.patch_namespaced_custom_object_scale(
            c.GROUP, c.VERSION, self.ns, c.MD_PLURAL, NAME, {"spec": {"replicas": replicas}}
        )

    @contextmanager
    def cordoned(self, node: str) -> Iterator[None]:
        """`node` unschedulable (kubectl cordon) for the block: new pods go elsewhere."""
        self.core.patch_node(node, {"spec": {"unschedulable": True}})
        try:
            yield
        finally:
            self.core.patch_node(node, {"spec": {"unschedulable": None}})

    def spread(self, n: int, timeout_s: float) -> list[Worker]:
        """Grow to `n` Ready workers on `n` nodes, one at a time: every node that holds one
        is cordoned while the next is scheduled (each instance needs its own quota)."""
        workers = self.wait_ready(1, timeout_s)
        while len(workers) < n:
            with ExitStack() as stack:
                for node in {w.node for w in workers}:
                    stack.enter_context(self.cordoned(node))
                self.scale(len(workers) + 1)
                workers = self.wait_ready(len(workers) + 1, timeout_s)
        workers = workers[:n]
        if len({w.node for w in workers}) < n:
            raise RuntimeError(f"{n} instances share nodes ({[w.node for w in workers]})")
        return workers

    def ready_workers(self) -> list[Worker]:
        selector = f"{c.LABEL_DEPLOYMENT}={NAME},app.kubernetes.io/component=worker"
        out = []
        for p in self.core.list_namespaced_pod(self.ns, label_selector=selector).items:
            ready = any(k.type == "Ready" and k.status == "True" for k in p.status.conditions or [])
            if p.metadata.deletion_timestamp or not ready or not p.status.pod_ip:
                continue
            node = self.core.read_node(p.spec.node_name)
            cpu = (node.metadata.labels or {}).get(LABEL_NODE_CPU)
            out.append(Worker(p.metadata.name, p.spec.node_name, p.status.pod_ip, _cores(cpu)))
        authorize(self.core, self.ns, NAME, [w.ip for w in out])
        return sorted(out, key=lambda w: w.pod)

    def wait_ready(self, n: int, timeout_s: float) -> list[Worker]:
        deadline = time.monotonic() + timeout_s
        while True:
            workers = self.ready_workers()
            if len(workers) >= n:
                return workers
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} Ready worker(s) not there after {timeout_s:.0f} s")
            time.sleep(1.0)


def _cores(label: str | None) -> float | None:
    if not label or label in ("none", "unlimited"):
        return None
    return float(label)


@contextmanager
def deployment(kubeconfig: Path) -> Iterator[Deployment]:
    """A fresh namespace with its own operator, and the bench's ModelDeployment in it
    deleted at exit, while the operator still runs (it holds a finalizer on the CR)."""
    with bench_namespace(kubeconfig, "cascade-capacity") as n:
        d = Deployment(n.core, n.custom, n.ns)
        try:
            yield d
        finally:
            d.delete()
