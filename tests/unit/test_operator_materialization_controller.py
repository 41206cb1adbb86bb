"""Materialization through the controller's reconcile, against the in-memory API server
and workers: the profile Job is kept for the current spec, its outcome and the workers'
reports reach the status, and each Event is told once over repeated reconciles."""

from __future__ import annotations

from typing import Any

import pytest
from controller_world import reconcile, run_pod, serving, status, world
from kubernetes.client.exceptions import ApiException
from operator_fixtures import REF, FakeCluster

from cascade_api import constants as c
from cascade_operator.clients.kube import Cluster, KubeRefusal
from cascade_operator.controller import Controller
from cascade_operator.materialization import job_selector
from cascade_protocol.materialize import MaterializationInfo, MaterializationState


def jobs(cluster: FakeCluster) -> list[dict[str, Any]]:
    return cluster.list_jobs(REF.namespace, job_selector(REF.name))


def reasons(cluster: FakeCluster) -> list[str]:
    return [e.reason for e in cluster.events if "Materializ" in e.reason]


def set_spec(controller: Controller, cluster: FakeCluster, **spec: Any) -> None:
    body = cluster.objects[(c.MD_KIND, REF.namespace, REF.name)]
    body["spec"] = {**body["spec"], **spec}
    body["metadata"]["generation"] += 1
    reconcile(controller)


def test_the_job_follows_the_spec_and_its_outcome_is_told_once() -> None:
    controller, cluster, _ = world(1, materialization={"enabled": True})
    reconcile(controller)
    (job,) = jobs(cluster)
    name = job["metadata"]["name"]
    assert reasons(cluster) == ["MaterializationStarted"]
    assert status(cluster)["materialization"] == {
        "enabled": True,
        "job": name,
        "phase": "Pending",
        "restored": 0,
        "refused": 0,
    }
    reconcile(controller)
    assert len(jobs(cluster)) == 1 and reasons(cluster) == ["MaterializationStarted"]
    job["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    reconcile(controller)
    reconcile(controller)
    assert status(cluster)["materialization"]["phase"] == "Succeeded"
    assert reasons(cluster) == ["MaterializationStarted", "Materialized"]
    # A new engine limit: a new Job, the old one deleted.
    set_spec(controller, cluster, engine={"maxModelLen": 1024})
    (new,) = jobs(cluster)
    assert new["metadata"]["name"] != name
    assert status(cluster)["materialization"]["job"] == new["metadata"]["name"]
    # Off: no Job, and the status says so.
    set_spec(controller, cluster, materialization={"enabled": False})
    assert jobs(cluster) == []
    assert status(cluster)["materialization"]["enabled"] is False
    assert "job" not in status(cluster)["materialization"]


def test_worker_reports_reach_the_status_and_a_refusal_is_told_once() -> None:
    controller, cluster, workers = world(1, hostCopies=0)
    reconcile(controller)
    run_pod(cluster, "llama-0", "10.0.0.1", ready=True)
    refused = MaterializationInfo(
        key="k2",
        state=MaterializationState.REFUSED,
        artifact="k1",
        reason="artifact k1 was recorded for another start (dtype: 'float16' != 'float32')",
    )
    workers.by_ip["10.0.0.1"] = serving("llama-0").model_copy(update={"materialization": refused})
    reconcile(controller)
    reconcile(controller)
    got = status(cluster)
    assert got["instances"][0]["materialization"]["state"] == "refused"
    assert (got["materialization"]["refused"], got["materialization"]["key"]) == (1, "k2")
    refusals = [e for e in cluster.events if e.reason == "MaterializationRefused"]
    assert len(refusals) == 1 and refusals[0].type == "Warning"
    assert "llama-0" in refusals[0].message and "dtype" in refusals[0].message


class FakeBatch:
    """BatchV1Api's Job calls as clients.kube.Cluster makes them; answers by status."""

    def __init__(self, status: int | None = None) -> None:
        self.status = status
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def _answer(self, name: str, *args: Any, **kw: Any) -> None:
        self.calls.append((name, args, kw))
        if self.status is not None:
            raise ApiException(status=self.status, reason="answer")

    def create_namespaced_job(self, *args: Any, **kw: Any) -> None:
        self._answer("create", *args, **kw)

    def delete_namespaced_job(self, *args: Any, **kw: Any) -> None:
        self._answer("delete", *args, **kw)


def kube_with(batch: FakeBatch) -> Cluster:
    cluster = Cluster.__new__(Cluster)  # no API client: only the Job calls are used
    cluster.batch = batch
    return cluster


def test_the_kube_client_deletes_a_job_with_its_pods_and_is_idempotent() -> None:
    batch = FakeBatch()
    kube_with(batch).delete_job("models", "j")
    ((_, args, kw),) = batch.calls
    assert args == ("j", "models") and kw["propagation_policy"] == "Background"
    kube_with(FakeBatch(404)).delete_job("models", "j")  # already gone: success
    kube_with(FakeBatch(409)).create_job({"metadata": {"namespace": "models", "name": "j"}})
    with pytest.raises(KubeRefusal):
        kube_with(FakeBatch(403)).create_job({"metadata": {"namespace": "models", "name": "j"}})
