"""The InferencePool hook (Gateway API Inference Extension): the pool the operator builds
is valid against the upstream CRD, selects exactly the pods that serve, is written only
when missing or changed, and the client asks discovery once a minute and never fails a
reconcile over a pool it may not write."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_fixtures import MODEL_URI, REF, FakeCluster, FakeWorkers, pod

from cascade_api import constants as c
from cascade_operator.clients.kube_errors import KubeRefusal
from cascade_operator.clients.kube_pools import InferencePools
from cascade_operator.config import OperatorConfig
from cascade_operator.controller import Controller
from cascade_operator.inference_pool import (
    API_VERSION,
    EPP_ANNOTATION,
    GROUP,
    KIND,
    LABEL_SERVING,
    PLURAL,
    PoolPlan,
    PoolSeen,
    endpoint_picker,
    inference_pool,
    keep_pool,
    serving_selector,
    stale,
)
from cascade_operator.inference_pool import serving as is_serving
from cascade_protocol.status import EnginePhase, ServingMode, WorkerPhase, WorkerStatus

Body = dict[str, Any]
CRD = Path(__file__).resolve().parents[1] / "data" / "crds"
POOL_CRD = yaml.safe_load((CRD / "inference.networking.k8s.io_inferencepools.yaml").read_text())
MD_BODY: Body = {"metadata": {"name": REF.name, "namespace": REF.namespace, "uid": REF.uid}}
LOCAL = ServingMode.LOCAL


def v1_schema() -> Body:
    (version,) = [v for v in POOL_CRD["spec"]["versions"] if v["name"] == "v1"]
    schema: Body = version["schema"]["openAPIV3Schema"]
    return schema


def unknown_fields(doc: Any, schema: Body, path: str = "") -> list[str]:
    """Keys the schema does not declare: an API server would prune them silently."""
    if isinstance(doc, list):
        return [u for i, d in enumerate(doc) for u in unknown_fields(d, schema["items"], path)]
    if not isinstance(doc, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    props, extra = schema.get("properties"), schema.get("additionalProperties")
    out = []
    for key, value in doc.items():
        if props is not None and key in props:
            out += unknown_fields(value, props[key], f"{path}.{key}")
        elif isinstance(extra, dict):
            out += unknown_fields(value, extra, f"{path}.{key}")
        elif props is not None and path != ".metadata":
            out.append(f"{path}.{key}")
    return out


def test_vendored_crd_is_the_v1_inference_pool() -> None:
    assert POOL_CRD["spec"]["group"] == GROUP
    assert POOL_CRD["spec"]["names"]["kind"] == KIND
    assert POOL_CRD["spec"]["names"]["plural"] == PLURAL
    assert [v["name"] for v in POOL_CRD["spec"]["versions"]] == API_VERSION.split("/")[1:]


@pytest.mark.parametrize("annotations", [{}, {EPP_ANNOTATION: "shared-epp:9010"}])
def test_built_pool_is_valid_against_the_upstream_schema(annotations: dict[str, str]) -> None:
    pool = inference_pool(REF, annotations)
    jsonschema.validate(pool, v1_schema())
    assert unknown_fields(pool, v1_schema()) == []
    spec = pool["spec"]
    # Required by every v1 CRD before v1.6; CEL there: a Service reference needs a port.
    assert set(spec) == {"selector", "targetPorts", "endpointPickerRef"}
    assert "port" in spec["endpointPickerRef"]
    assert spec["targetPorts"] == [{"number": c.WORKER_PORT}]
    assert spec["selector"]["matchLabels"] == {
        c.LABEL_DEPLOYMENT: REF.name,
        c.LABEL_COMPONENT: c.COMPONENT_WORKER,
        LABEL_SERVING: "true",
    }
    (owner,) = pool["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (c.MD_KIND, REF.uid, True)
    assert pool["metadata"]["labels"][c.LABEL_MANAGED_BY] == c.MANAGED_BY
    selector = dict(term.split("=") for term in serving_selector(REF.name).split(","))
    assert selector == spec["selector"]["matchLabels"]


@pytest.mark.parametrize(
    ("raw", "name", "port"),
    [
        (None, "llama-epp", 9002),
        ("", "llama-epp", 9002),
        ("my-epp", "my-epp", 9002),
        (" my-epp:9010 ", "my-epp", 9010),
        (":9010", "llama-epp", 9010),
        ("my-epp:grpc", "my-epp", 9002),
    ],
)
def test_endpoint_picker_from_the_annotation(raw: str | None, name: str, port: int) -> None:
    annotations = {} if raw is None else {EPP_ANNOTATION: raw}
    assert endpoint_picker(REF.name, annotations) == {"name": name, "port": {"number": port}}


@pytest.mark.parametrize(
    ("view", "mode", "expected"),
    [
        (pod(0), LOCAL, True),
        (pod(0), ServingMode.HEAD, True),
        (pod(0), None, True),  # status unread: readiness decides
        (pod(0), ServingMode.STAGE, False),  # Ready, but serves another's pipeline
        (pod(0), ServingMode.IDLE, False),
        (pod(0), ServingMode.LOADING, False),
        (pod(0, ready=False), LOCAL, False),
        (pod(0, terminating=True), LOCAL, False),
        (pod(0, phase="Failed"), LOCAL, False),
        (pod(0, host_copy=True), None, False),
    ],
)
def test_serving_is_ready_and_taking_requests(view: Any, mode: Any, expected: bool) -> None:
    assert is_serving(view, mode) is expected


def test_labels_follow_serving_and_the_pool_is_written_when_missing() -> None:
    pods = [pod(0), pod(1), pod(2, ready=False), pod(3)]
    modes = {"llama-0": LOCAL, "llama-1": LOCAL, "llama-3": ServingMode.STAGE}
    seen = PoolSeen(labelled=frozenset({"llama-1", "llama-2", "llama-9"}))
    plan = keep_pool(MD_BODY, pods, modes, seen)
    # llama-9 is labelled but no longer observed (deleted): its label goes too.
    assert plan.labels == {"llama-0": "true", "llama-2": None, "llama-9": None}
    assert plan.pool == inference_pool(REF, {})
    assert plan.namespace == REF.namespace


def test_a_stored_pool_with_server_defaults_is_not_rewritten() -> None:
    built = inference_pool(REF, {})
    stored = yaml.safe_load(yaml.safe_dump(built))
    stored["spec"]["appProtocol"] = "http"  # v1.4+ defaults
    stored["spec"]["endpointPickerRef"] |= {"group": "", "kind": "Service"}
    stored["spec"]["endpointPickerRef"]["failureMode"] = "FailClose"
    stored["status"] = {"parents": []}
    assert not stale(built, stored)
    seen = PoolSeen(frozenset({"llama-0"}), stored)
    assert keep_pool(MD_BODY, [pod(0)], {"llama-0": LOCAL}, seen) == PoolPlan(REF.namespace)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s["selector"]["matchLabels"].update({"extra": "x"}),
        lambda s: s.update(targetPorts=[{"number": 8000}]),
        lambda s: s["endpointPickerRef"].update(name="other"),
        lambda s: s["endpointPickerRef"].update(failureMode="FailOpen"),
    ],
)
def test_a_changed_pool_is_put_back(change: Any) -> None:
    built = inference_pool(REF, {})
    stored = yaml.safe_load(yaml.safe_dump(built))
    change(stored["spec"])
    assert stale(built, stored)
    assert stale(built, None)


def test_an_annotation_change_moves_the_reference() -> None:
    stored = inference_pool(REF, {})
    body = MD_BODY | {"metadata": MD_BODY["metadata"] | {"annotations": {EPP_ANNOTATION: "e:1"}}}
    plan = keep_pool(body, [], {}, PoolSeen(pool=stored))
    assert plan.pool is not None
    assert plan.pool["spec"]["endpointPickerRef"] == {"name": "e", "port": {"number": 1}}


# The controller's hook, against the in-memory API with a pool API beside it.


class FakePools:
    """`Cluster.pools` over a FakeCluster: the serving label on its pods, pools by name."""

    def __init__(self, cluster: FakeCluster, served: bool = True) -> None:
        self.cluster, self.is_served = cluster, served
        self.pools: dict[str, Body] = {}
        self.writes: list[str] = []

    def served(self) -> bool:
        return self.is_served

    def observe(self, ref: Any) -> PoolSeen:
        pods = self.cluster.list_pods(ref.namespace, serving_selector(ref.name))
        return PoolSeen(frozenset(p["metadata"]["name"] for p in pods), self.pools.get(ref.name))

    def act(self, plan: PoolPlan) -> None:
        for name, value in plan.labels.items():
            labels = self.cluster.objects[("Pod", plan.namespace, name)]["metadata"]["labels"]
            labels.pop(LABEL_SERVING) if value is None else labels.update({LABEL_SERVING: value})
        if plan.pool is not None:
            self.pools[plan.pool["metadata"]["name"]] = plan.pool
            self.writes.append(plan.pool["metadata"]["name"])


def run_pod(cluster: FakeCluster, name: str, ip: str, *, ready: bool) -> None:
    """What the kubelet does: start the pod, report readiness."""
    pod = cluster.objects[("Pod", REF.namespace, name)]
    pod["spec"]["nodeName"] = "n0"
    ready_cond = {"type": "Ready", "status": "True" if ready else "False"}
    pod["status"] = {"phase": "Running", "podIP": ip, "conditions": [ready_cond]}


def serving(name: str) -> WorkerStatus:
    """A worker whose engine takes requests and runs every layer itself."""
    return WorkerStatus(
        pod=name, phase=WorkerPhase.READY, engine=EnginePhase.SERVING, model_digest="m1", mode=LOCAL
    )


def world(served: bool) -> tuple[Controller, FakeCluster, FakeWorkers, FakePools]:
    cluster, workers = FakeCluster(), FakeWorkers()
    meta = {"name": REF.name, "namespace": REF.namespace, "generation": 1}
    spec = {"model": {"uri": MODEL_URI}, "replicas": 2, "hostCopies": 0}
    cluster.add(c.MD_KIND, {"kind": c.MD_KIND, "metadata": meta, "spec": spec})
    pools = FakePools(cluster, served)
    cluster.pools = pools  # type: ignore[attr-defined]
    return Controller(cluster, OperatorConfig(), workers), cluster, workers, pools  # type: ignore[arg-type]


def selected(cluster: FakeCluster, pools: FakePools) -> list[str]:
    match = pools.pools[REF.name]["spec"]["selector"]["matchLabels"]
    selector = ",".join(f"{k}={v}" for k, v in match.items())
    return [p["metadata"]["name"] for p in cluster.list_pods(REF.namespace, selector)]


def test_the_controller_keeps_the_pool_on_the_serving_pods() -> None:
    controller, cluster, workers, pools = world(served=True)
    controller.reconcile(REF.namespace, REF.name)  # creates the pods, and the pool
    assert pools.writes == [REF.name]
    assert selected(cluster, pools) == []
    run_pod(cluster, "llama-0", "10.0.0.1", ready=True)
    run_pod(cluster, "llama-1", "10.0.0.2", ready=False)
    workers.by_ip["10.0.0.1"] = serving("llama-0")
    controller.reconcile(REF.namespace, REF.name)
    assert selected(cluster, pools) == ["llama-0"]
    run_pod(cluster, "llama-1", "10.0.0.2", ready=True)
    workers.by_ip["10.0.0.2"] = serving("llama-1")
    controller.reconcile(REF.namespace, REF.name)
    assert selected(cluster, pools) == ["llama-0", "llama-1"]
    run_pod(cluster, "llama-0", "10.0.0.1", ready=False)
    controller.reconcile(REF.namespace, REF.name)
    assert selected(cluster, pools) == ["llama-1"]
    assert pools.writes == [REF.name]  # unchanged since: never written again


def test_without_the_crd_nothing_is_labelled_or_written() -> None:
    controller, cluster, workers, pools = world(served=False)
    controller.reconcile(REF.namespace, REF.name)
    run_pod(cluster, "llama-0", "10.0.0.1", ready=True)
    workers.by_ip["10.0.0.1"] = serving("llama-0")
    controller.reconcile(REF.namespace, REF.name)
    assert pools.writes == []
    pod0 = cluster.objects[("Pod", REF.namespace, "llama-0")]
    assert LABEL_SERVING not in pod0["metadata"]["labels"]


# The client, over stand-ins for the generated API classes.


class Custom:
    def __init__(self, resources: list[str] | None, create: int | None = None) -> None:
        self.resources, self.create_status = resources, create
        self.calls: list[tuple[str, Any]] = []

    def get_api_resources(self, group: str, version: str) -> Any:
        self.calls.append(("discover", (group, version)))
        if self.resources is None:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(resources=[SimpleNamespace(name=r) for r in self.resources])

    def create_namespaced_custom_object(self, *args: Any) -> None:
        self.calls.append(("create", args))
        if self.create_status is not None:
            raise ApiException(status=self.create_status, reason="refused")

    def patch_namespaced_custom_object(self, *args: Any, **kw: Any) -> None:
        self.calls.append(("patch", (args, kw)))


class Core:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Body]] = []

    def patch_namespaced_pod(self, name: str, namespace: str, body: Body) -> None:
        self.patches.append((name, body))


def client_with(custom: Custom) -> tuple[InferencePools, Core]:
    pools, core = InferencePools(client.ApiClient()), Core()
    pools.custom, pools.core = custom, core  # type: ignore[assignment]
    return pools, core


def test_discovery_is_asked_once_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    custom = Custom(resources=None)
    pools, _ = client_with(custom)
    assert pools.served() is False  # 404: the group is not served
    custom.resources = ["inferencepools", "inferencepools/status"]
    clock[0] += 30
    assert pools.served() is False  # cached
    clock[0] += 31
    assert pools.served() is True
    assert [name for name, _ in custom.calls] == ["discover", "discover"]
    assert custom.calls[0][1] == (GROUP, "v1")


def test_act_labels_pods_creates_and_else_replaces_the_spec() -> None:
    pool = inference_pool(REF, {})
    pools, core = client_with(Custom([], create=409))
    pools.act(PoolPlan(REF.namespace, {"llama-0": "true", "llama-1": None}, pool))
    assert core.patches == [
        ("llama-0", {"metadata": {"labels": {LABEL_SERVING: "true"}}}),
        ("llama-1", {"metadata": {"labels": {LABEL_SERVING: None}}}),
    ]
    (_, _create), (_, (args, kw)) = pools.custom.calls  # type: ignore[attr-defined]
    assert args[-1] == [{"op": "replace", "path": "/spec", "value": pool["spec"]}]
    assert kw == {"_content_type": "application/json-patch+json"}


@pytest.mark.parametrize("status", [403, 422])
def test_a_lasting_refusal_is_logged_once_not_raised(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    pools, _ = client_with(Custom([], create=status))
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            pools.act(PoolPlan(REF.namespace, {}, inference_pool(REF, {})))
    assert len([r for r in caplog.records if "InferencePool refused" in r.message]) == 1


def test_other_refusals_fail_the_reconcile() -> None:
    pools, _ = client_with(Custom([], create=500))
    with pytest.raises(KubeRefusal):
        pools.act(PoolPlan(REF.namespace, {}, inference_pool(REF, {})))
