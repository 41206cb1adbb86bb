"""A Controller in a world of fakes (operator_fixtures' in-memory API server and
workers), and what a test does to it: reconcile, run a pod as the kubelet would, read
the status it wrote. Shared by the controller's tests."""

from __future__ import annotations

from typing import Any

from operator_fixtures import REF, B, FakeCluster, FakeWorkers, md_body

from cascade_api import constants as c
from cascade_operator.config import OperatorConfig
from cascade_operator.controller import Controller
from cascade_protocol.status import WorkerStatus


def world(replicas: int, **spec: Any) -> tuple[Controller, FakeCluster, FakeWorkers]:
    cluster, workers = FakeCluster(), FakeWorkers()
    cluster.add(c.MD_KIND, md_body(replicas, **spec))
    controller = Controller(cluster, OperatorConfig(), workers)  # type: ignore[arg-type]
    return controller, cluster, workers


def serving(pod: str) -> WorkerStatus:
    """A worker that holds all B blocks of model m1 and serves them."""
    return WorkerStatus(
        pod=pod, phase="ready", engine="serving", model_digest="m1", blocks_loaded=B, blocks_total=B
    )


def reconcile(controller: Controller) -> None:
    controller.reconcile(REF.namespace, REF.name)


def status(cluster: FakeCluster) -> dict[str, Any]:
    body = cluster.get_md(REF.namespace, REF.name)
    assert body is not None
    return dict(body.get("status") or {})


def run_pod(cluster: FakeCluster, name: str, ip: str, *, ready: bool) -> None:
    """What the kubelet does: place the pod, start it, report readiness."""
    pod = cluster.objects[("Pod", REF.namespace, name)]
    pod["spec"]["nodeName"] = "n" + name.rsplit("-", 1)[-1]
    ready_cond = {"type": "Ready", "status": "True" if ready else "False"}
    pod["status"] = {"phase": "Running", "podIP": ip, "conditions": [ready_cond]}


def conditions(cluster: FakeCluster) -> dict[str, dict[str, Any]]:
    return {cond["type"]: cond for cond in status(cluster)["conditions"]}
