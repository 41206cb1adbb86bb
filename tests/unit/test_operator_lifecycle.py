"""The glue steps around the ScalePlan lifecycle: how new pods get their weights (the
first from storage, the rest await a plan), scale-down sparing host copies, when a
storage load must not be ordered twice, when to poll fast, and the status merge."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.client.exceptions import ApiException

from cascade_api.base import Condition, ConditionStatus
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import builders, plandriver
from cascade_operator.config import OperatorConfig
from cascade_operator.lifecycle import in_motion, merge_plan_status, storage_start_pending
from cascade_operator.plan_status import PlanPolicy
from cascade_operator.plandriver import Gathered, PlanDriver
from cascade_operator.pool import PoolDecision
from cascade_operator.reconcile import decide, scale_down_victims, start_modes
from cascade_operator.scaleplans import PlanDecision, StatusPatch
from cascade_operator.view import GatewayView, MdRef, Observed, PodView
from cascade_operator.workers import WorkerView
from cascade_planner import topology_from_nodes

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
REF = MdRef(name="llama", namespace="models", uid="uid-1")
GW_UP = GatewayView(deployment_exists=True, service_exists=True, available_replicas=1)


def pod(index: int, **kw: Any) -> PodView:
    defaults: dict[str, Any] = {"phase": "Running", "terminating": False, "ready": True}
    return PodView(name=f"llama-{index}", index=index, node="n0", **(defaults | kw))


def observe(replicas: int, pods: list[PodView], **kw: Any) -> Observed:
    return Observed(
        ref=REF,
        generation=1,
        spec={"model": {"uri": "file:///models/tiny"}, "replicas": replicas},
        status={"observedGeneration": 1},
        pods=pods,
        gateway=GW_UP,
        **kw,
    )


def serve_env(manifest: dict[str, Any]) -> str:
    env = manifest["spec"]["containers"][0]["env"]
    return str(next(e["value"] for e in env if e["name"] == "CASCADE_SERVE"))


def test_first_instance_loads_from_storage_the_rest_await_weights() -> None:
    d = decide(observe(3, []), OperatorConfig(), NOW)
    assert [serve_env(m) for m in d.create_pods] == ["1", "await", "await"]
    starts = [m["metadata"]["annotations"][builders.START_ANNOTATION] for m in d.create_pods]
    assert starts == ["storage", "await", "await"]


def test_scale_up_from_a_running_instance_streams_to_every_new_pod() -> None:
    d = decide(observe(6, [pod(0)]), OperatorConfig(), NOW)
    assert len(d.create_pods) == 5
    assert {serve_env(m) for m in d.create_pods} == {"await"}


def test_start_modes() -> None:
    assert start_modes([], 0) == []
    assert start_modes([], 2) == ["storage", "await"]
    assert start_modes([pod(0)], 1) == ["await"]


def test_scale_down_spares_host_copy_holders() -> None:
    pods = [pod(0), pod(1), pod(2)]
    victims = scale_down_victims(pods, 2, frozenset({"llama-2"}))
    assert [p.name for p in victims] == ["llama-1", "llama-0"]
    d = decide(observe(1, pods, protected=frozenset({"llama-2"})), OperatorConfig(), NOW)
    assert sorted(d.delete_pods) == ["llama-0", "llama-1"]


def raw_pod(name: str, start: str, created: datetime, ip: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "annotations": {builders.START_ANNOTATION: start},
            "creationTimestamp": created.isoformat(),
        },
        "spec": {"nodeName": "n0"},
        "status": {"phase": "Running" if ip else "Pending", "podIP": ip},
    }


def test_storage_start_unreachable_holds_back_a_second_load() -> None:
    first = raw_pod("llama-0", "storage", NOW - timedelta(seconds=3), ip="10.0.0.1")
    other = raw_pod("llama-1", "await", NOW - timedelta(seconds=3), ip="10.0.0.2")
    workers = [WorkerView.of(first, None), WorkerView.of(other, {"phase": "idle"})]
    assert storage_start_pending([first, other], workers, NOW)
    # Reachable (it reports loading, or anything): the pool sees it, no hold needed.
    workers[0] = WorkerView.of(first, {"phase": "loading"})
    assert not storage_start_pending([first, other], workers, NOW)
    # Unreachable for too long: it no longer blocks a load by another pod.
    late = NOW + timedelta(minutes=5)
    assert not storage_start_pending([first, other], [WorkerView.of(first, None)], late)
    # Only pods started from storage count.
    assert not storage_start_pending([other], [WorkerView.of(other, None)], NOW)


def worker(name: str, **status: Any) -> WorkerView:
    body = raw_pod(name, "await", NOW, ip="10.0.0.9")
    return WorkerView.of(body, status or None)


def test_in_motion_while_anything_moves() -> None:
    serving = worker("a", phase="ready", engine="serving", blocks_loaded=4, blocks_total=4)
    assert not in_motion([serving], [], PlanDecision())
    assert in_motion([serving, worker("b", phase="idle")], [], PlanDecision())
    assert in_motion([serving, worker("b", phase="transferring")], [], PlanDecision())
    assert in_motion([replace(serving, engine="starting")], [], PlanDecision())
    assert in_motion([serving], [], PlanDecision(create=[{}]))


def test_merge_plan_status_sets_condition_and_clears_ended_plan() -> None:
    cond = Condition(
        type="Planned",
        status=ConditionStatus.TRUE,
        reason="PlanActive",
        message="x",
        observed_generation=1,
    )
    running = merge_plan_status({"replicas": 2}, {}, PlanDecision(cond, current_plan="p1"), NOW)
    assert running["currentPlan"] == "p1"
    assert [c["type"] for c in running["conditions"]] == ["Planned"]
    done = merge_plan_status(running, running, PlanDecision(cond), NOW)
    assert done["currentPlan"] is None  # a merge patch needs the explicit null
    assert merge_plan_status(running, {}, PlanDecision(cond), NOW).get("currentPlan") is None


class RefusingCluster:
    """Records writes; the API server refuses one plan's status (422) and one create."""

    def __init__(self) -> None:
        self.patched: list[str] = []
        self.created: list[str] = []
        self.deleted: list[str] = []

    def create_scaleplan(self, manifest: dict[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        if name == "refused-create":
            raise ApiException(status=422, reason="Unprocessable Entity")
        self.created.append(name)
        return True

    def patch_scaleplan_status(self, ns: str, name: str, status: dict[str, Any]) -> None:
        if name == "refused":
            err = ApiException(status=422, reason="Unprocessable Entity")
            err.body = '{"message": "status.progress: Invalid value"}'
            raise err
        self.patched.append(name)

    def delete_scaleplan(self, ns: str, name: str) -> None:
        self.deleted.append(name)


class NoWorkers:
    def send_all(self, orders: list[Any]) -> list[Any]:
        return []


def test_a_refused_plan_write_does_not_stop_the_rest_of_the_tick(monkeypatch: Any) -> None:
    decision = PlanDecision(
        create=[{"metadata": {"name": "refused-create"}}, {"metadata": {"name": "new"}}],
        patches=[StatusPatch("refused", {}), StatusPatch("other", {"progress": "1/1"})],
        delete=["old"],
    )
    monkeypatch.setattr(plandriver, "decide_plans", lambda *_: decision)
    driver = PlanDriver(RefusingCluster(), NoWorkers(), PlanPolicy())  # type: ignore[arg-type]
    monkeypatch.setattr(driver, "_block_table", lambda *_: None)
    got = Gathered(workers=[], pool=PoolDecision(None), topo=topology_from_nodes([]), plans=[])
    body = {"metadata": {"name": "llama", "namespace": "models", "generation": 1}}
    spec = ModelDeploymentSpec.model_validate({"model": {"uri": "file:///models/tiny"}})
    driver.tick(body, REF, spec, got, NOW)
    cluster = driver.cluster
    assert isinstance(cluster, RefusingCluster)
    assert (cluster.created, cluster.patched, cluster.deleted) == (["new"], ["other"], ["old"])
    assert ("models", "refused") not in driver._last_patch  # written again next tick
