"""spec.multicast.fromPeers false, tick by tick against an in-memory API server and
workers: every new pod (first, scale-up, replacement) starts from storage
(CASCADE_SERVE=1) and serves by itself; no ScalePlan is ever made, no transfer or serve
order is sent. With fromPeers true (the default) the same scale-up gets a plan."""

from __future__ import annotations

from typing import Any

from controller_world import serving, world
from operator_fixtures import REF, FakeCluster, FakeWorkers

from cascade_operator.controller import Controller
from cascade_operator.instances import start_modes
from cascade_protocol.status import WorkerStatus

B = 8


def tick(controller: Controller) -> None:
    controller.reconcile(REF.namespace, REF.name)


def pods(cluster: FakeCluster) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.list_pods(REF.namespace, "")}


def start(pod: dict[str, Any]) -> tuple[str, str]:
    """(the start annotation, CASCADE_SERVE) of a pod as created."""
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    return pod["metadata"]["annotations"]["cascade.dev/start"], env["CASCADE_SERVE"]


def run(cluster: FakeCluster, workers: FakeWorkers, name: str, status: WorkerStatus) -> None:
    """The kubelet starts the pod; its worker answers with `status`."""
    i = name.rsplit("-", 1)[-1]
    ip = f"10.0.0.{int(i) + 1}"
    pod = cluster.objects[("Pod", REF.namespace, name)]
    pod["spec"]["nodeName"] = f"n{i}"
    ready = status.engine == "serving"
    cond = {"type": "Ready", "status": "True" if ready else "False"}
    pod["status"] = {"phase": "Running", "podIP": ip, "conditions": [cond]}
    workers.by_ip[ip] = status


def loading(pod: str) -> WorkerStatus:
    return WorkerStatus(pod=pod, phase="loading", blocks_total=B)


def idle(pod: str) -> WorkerStatus:
    return WorkerStatus(pod=pod, phase="idle")


def scale(cluster: FakeCluster, replicas: int) -> None:
    cluster.scale_md(REF.namespace, REF.name, replicas)


def plans(cluster: FakeCluster) -> list[dict[str, Any]]:
    return cluster.list_scaleplans(REF.namespace, "")


def test_start_modes_without_peers_are_all_storage() -> None:
    assert start_modes(False, 3, from_peers=False) == ["storage"] * 3
    assert start_modes(False, 3) == ["storage", "await", "await"]


def one_to_three(from_peers: bool) -> tuple[Controller, FakeCluster, FakeWorkers, list[Any]]:
    """Tick 1: the first pod (from storage, as always); it serves; tick 2; 1 -> 3; tick
    3. The world, and how the two new pods start."""
    controller, cluster, workers = world(1, multicast={"fromPeers": from_peers}, hostCopies=0)
    tick(controller)
    assert {n: start(p) for n, p in pods(cluster).items()} == {"llama-0": ("storage", "1")}
    run(cluster, workers, "llama-0", serving("llama-0"))
    tick(controller)
    scale(cluster, 3)
    tick(controller)
    got = pods(cluster)
    return controller, cluster, workers, [start(got[n]) for n in ("llama-1", "llama-2")]


def test_a_scale_up_without_peers_loads_from_storage_and_makes_no_plan() -> None:
    controller, cluster, workers, starts = one_to_three(from_peers=False)
    # 1 -> 3 while llama-0 serves: both new pods load from storage themselves.
    assert starts == [("storage", "1")] * 2
    # Tick 4: they run and load; a holder exists, yet nobody streams to them.
    run(cluster, workers, "llama-1", loading("llama-1"))
    run(cluster, workers, "llama-2", loading("llama-2"))
    tick(controller)
    assert plans(cluster) == []
    # Tick 5: one loaded and serves by itself, the other still loads.
    run(cluster, workers, "llama-1", serving("llama-1"))
    tick(controller)
    # Tick 6: both serve.
    run(cluster, workers, "llama-2", serving("llama-2"))
    tick(controller)
    assert plans(cluster) == []
    assert workers.sent == []  # no transfer, serve or load order: they started themselves
    body = cluster.get_md(REF.namespace, REF.name)
    assert body is not None
    assert [i["blocksLoaded"] for i in body["status"]["instances"]] == [B, B, B]
    assert "ScalePlanCreated" not in [e.reason for e in cluster.events]


def test_a_replacement_without_peers_loads_from_storage() -> None:
    controller, cluster, workers = world(2, multicast={"fromPeers": False}, hostCopies=0)
    tick(controller)
    run(cluster, workers, "llama-0", serving("llama-0"))
    run(cluster, workers, "llama-1", serving("llama-1"))
    tick(controller)
    cluster.objects[("Pod", REF.namespace, "llama-1")]["status"]["phase"] = "Failed"
    tick(controller)  # the failed pod goes, a new one takes its place: from storage
    got = pods(cluster)
    assert sorted(got) == ["llama-0", "llama-2"] and start(got["llama-2"]) == ("storage", "1")
    run(cluster, workers, "llama-2", loading("llama-2"))
    tick(controller)
    assert plans(cluster) == []


def test_with_peers_the_same_scale_up_streams_along_a_plan() -> None:
    controller, cluster, workers, starts = one_to_three(from_peers=True)
    assert starts == [("await", "await")] * 2
    run(cluster, workers, "llama-1", idle("llama-1"))
    run(cluster, workers, "llama-2", idle("llama-2"))
    tick(controller)
    made = plans(cluster)
    assert len(made) == 1 and sorted(made[0]["spec"]["targets"]) == ["llama-1", "llama-2"]
