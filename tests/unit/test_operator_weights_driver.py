"""The glue around the ScalePlan lifecycle: when a storage load must not be ordered
twice, when to poll fast, and a tick that survives the API server refusing a write."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from operator_fixtures import NOW, REF, FakeWorkers, md, raw_pod, worker

from cascade_operator.clients.kube import KubeRefusal
from cascade_operator.observed import PodView
from cascade_operator.weights import driver
from cascade_operator.weights.driver import Gathered, PlanDriver
from cascade_operator.weights.lifecycle import PlanDecision, StatusPatch
from cascade_operator.weights.motion import in_motion, storage_start_pending
from cascade_operator.weights.pool import PoolDecision
from cascade_operator.weights.progress import PlanPolicy
from cascade_operator.weights.workers import WorkerView
from cascade_planner import topology_from_nodes
from cascade_protocol.status import WorkerStatus


def view(name: str, start: str, ip: str | None, status: WorkerStatus | None = None) -> WorkerView:
    return WorkerView.of(PodView.of(raw_pod(name, start=start, created=NOW, ip=ip)), status)


def test_storage_start_unreachable_holds_back_a_second_load() -> None:
    first = PodView.of(raw_pod("llama-0", start="storage", created=NOW, ip="10.0.0.1"))
    other = PodView.of(raw_pod("llama-1", start="await", created=NOW, ip="10.0.0.2"))
    idle = WorkerStatus(pod="llama-1", phase="idle")
    workers = [WorkerView.of(first, None), WorkerView.of(other, idle)]
    soon = NOW + timedelta(seconds=3)
    assert storage_start_pending([first, other], workers, soon)
    # Reachable (it reports loading, or anything): the pool sees it, no hold needed.
    workers[0] = WorkerView.of(first, WorkerStatus(pod="llama-0", phase="loading"))
    assert not storage_start_pending([first, other], workers, soon)
    # Unreachable for too long: it no longer blocks a load by another pod.
    late = NOW + timedelta(minutes=5)
    assert not storage_start_pending([first, other], [WorkerView.of(first, None)], late)
    # Only pods started from storage count.
    assert not storage_start_pending([other], [WorkerView.of(other, None)], soon)


def test_in_motion_while_anything_moves() -> None:
    serving = worker("a", phase="ready", engine="serving", blocks_loaded=4, blocks_total=4)
    assert not in_motion([serving], [], PlanDecision())
    assert in_motion([serving, worker("b", phase="idle")], [], PlanDecision())
    assert in_motion([serving, worker("b", phase="transferring")], [], PlanDecision())
    assert in_motion([replace(serving, engine="starting")], [], PlanDecision())
    assert in_motion([serving], [], PlanDecision(create=[{}]))


def test_worker_view_joins_the_pod_and_its_status() -> None:
    w = view("llama-3", "await", "10.0.0.3", WorkerStatus(pod="llama-3", blocks_loaded=2))
    assert (w.alive, w.ip, w.blocks_loaded, w.phase) == (True, "10.0.0.3", 2, "idle")
    pending = view("llama-4", "await", None)
    assert (pending.alive, pending.starting, pending.phase) == (False, True, None)


class RefusingCluster:
    """Records writes; the API server refuses one plan's status (422) and one create."""

    def __init__(self) -> None:
        self.patched: list[str] = []
        self.created: list[str] = []
        self.deleted: list[str] = []

    def create_scaleplan(self, manifest: dict[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        if name == "refused-create":
            raise KubeRefusal(422, "Unprocessable Entity")
        self.created.append(name)
        return True

    def patch_scaleplan_status(self, ns: str, name: str, status: dict[str, Any]) -> None:
        if name == "refused":
            raise KubeRefusal(422, "status.progress: Invalid value")
        self.patched.append(name)

    def delete_scaleplan(self, ns: str, name: str) -> None:
        self.deleted.append(name)


def test_a_refused_plan_write_does_not_stop_the_rest_of_the_tick(monkeypatch: Any) -> None:
    decision = PlanDecision(
        create=[{"metadata": {"name": "refused-create"}}, {"metadata": {"name": "new"}}],
        patches=[StatusPatch("refused", {}), StatusPatch("other", {"progress": "1/1"})],
        delete=["old"],
    )
    monkeypatch.setattr(driver, "decide_plans", lambda *_: decision)
    cluster = RefusingCluster()
    plans = PlanDriver(cluster, FakeWorkers(), PlanPolicy())  # type: ignore[arg-type]
    got = Gathered([], [], PoolDecision(None), topology_from_nodes([]), [])
    plans.tick(REF, 1, md(), got, NOW)
    assert (cluster.created, cluster.patched, cluster.deleted) == (["new"], ["other"], ["old"])
    assert ("models", "refused") not in plans._last_patch  # written again next tick
