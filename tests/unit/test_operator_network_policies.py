"""The NetworkPolicies the operator builds for a ModelDeployment, as rendered objects.

The dev cluster has no CNI that enforces them, so the rules are checked here against the
labels of the pods the operator really builds: workers take HTTP only from the operator
and their gateway, every port only from their own deployment's workers and host copies,
and the gateway takes its port from anyone.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client
from kubernetes_validate.utils import all_versions, major_minor
from operator_fixtures import MODEL_URI, REF, FakeCluster, FakeWorkers, md

from cascade_api import constants as c
from cascade_operator import builders
from cascade_operator.config import OperatorConfig
from cascade_operator.controller import Controller
from cascade_operator.host_copies import host_copy_pod
from cascade_operator.materialization import profile_job
from cascade_operator.network_policies import (
    changed,
    gateway_policy,
    network_policies,
    policy_selector,
    workers_policy,
)
from cascade_operator.observed import MdRef

Manifest = dict[str, Any]

CFG = OperatorConfig(
    operator_namespace="cascade-system",
    operator_pod_labels=(
        ("app.kubernetes.io/component", "operator"),
        ("app.kubernetes.io/instance", "cascade"),
        ("app.kubernetes.io/name", "cascade"),
    ),
)
OTHER = MdRef(name="mistral", namespace=REF.namespace, uid="uid-2")


def matches(selector: Manifest, labels: dict[str, str]) -> bool:
    """Kubernetes label-selector semantics (matchLabels and `In` expressions)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        assert expr["operator"] == "In", expr
        if labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


def pod_labels() -> dict[str, dict[str, str]]:
    """The labels of every kind of pod the operator builds, for two deployments."""
    spec = md()
    out = {
        "worker": builders.worker_pod(REF, spec, 0, CFG),
        "host copy": host_copy_pod(REF, spec, 0, CFG),
        "profile job": profile_job(REF, spec, CFG)["spec"]["template"],
        "gateway": builders.gateway_deployment(REF, spec, CFG)["spec"]["template"],
        "other worker": builders.worker_pod(OTHER, spec, 0, CFG),
        "other host copy": host_copy_pod(OTHER, spec, 0, CFG),
        "other gateway": builders.gateway_deployment(OTHER, spec, CFG)["spec"]["template"],
    }
    return {what: dict(obj["metadata"]["labels"]) for what, obj in out.items()}


def selected(selector: Manifest) -> set[str]:
    return {what for what, labels in pod_labels().items() if matches(selector, labels)}


def test_the_worker_policy_selects_the_deployments_worker_processes_only() -> None:
    spec = workers_policy(REF, CFG)["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert selected(spec["podSelector"]) == {"worker", "host copy", "profile job"}


def test_workers_take_http_only_from_the_operator_and_their_gateway() -> None:
    http, peers = workers_policy(REF, CFG)["spec"]["ingress"]
    assert http["ports"] == [{"protocol": "TCP", "port": c.WORKER_PORT}]
    operator, gateway = http["from"]
    assert operator == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "cascade-system"}},
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/component": "operator",
                "app.kubernetes.io/instance": "cascade",
                "app.kubernetes.io/name": "cascade",
            }
        },
    }
    assert set(gateway) == {"podSelector"}  # this namespace only
    assert selected(gateway["podSelector"]) == {"gateway"}
    # Every port (UCX's TCP lanes listen on ephemeral ports) from the deployment's peers.
    assert "ports" not in peers
    (peer,) = peers["from"]
    assert set(peer) == {"podSelector"}
    assert selected(peer["podSelector"]) == {"worker", "host copy"}


def test_the_gateway_takes_its_port_from_anyone() -> None:
    spec = gateway_policy(REF)["spec"]
    assert selected(spec["podSelector"]) == {"gateway"}
    assert spec["ingress"] == [{"ports": [{"protocol": "TCP", "port": c.GATEWAY_PORT}]}]


def test_policies_are_owned_labelled_and_named_per_deployment() -> None:
    policies = network_policies(REF, CFG)
    assert [p["metadata"]["name"] for p in policies] == ["llama-workers", "llama-gateway"]
    wanted = dict(term.split("=") for term in policy_selector(REF.name).split(","))
    for policy in policies:
        meta = policy["metadata"]
        assert (policy["apiVersion"], policy["kind"]) == ("networking.k8s.io/v1", "NetworkPolicy")
        assert meta["namespace"] == REF.namespace
        assert meta["ownerReferences"] == [builders.owner_reference(REF)]
        assert wanted.items() <= meta["labels"].items()


def test_operator_identity_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADE_OPERATOR_NAMESPACE", "ops")
    monkeypatch.setenv("CASCADE_OPERATOR_POD_LABELS", "b=2, a=1,,junk")
    cfg = OperatorConfig.from_env()
    assert (cfg.operator_namespace, cfg.operator_pod_labels) == ("ops", (("a", "1"), ("b", "2")))
    monkeypatch.delenv("CASCADE_OPERATOR_NAMESPACE")
    monkeypatch.delenv("CASCADE_OPERATOR_POD_LABELS")
    default = OperatorConfig.from_env()  # the chart's default release
    assert (default.operator_namespace, default.operator_pod_labels) == (
        OperatorConfig().operator_namespace,
        OperatorConfig().operator_pod_labels,
    )


def test_changed_names_the_missing_and_the_altered() -> None:
    desired = network_policies(REF, CFG)
    assert changed(desired, []) == desired
    assert changed(desired, desired) == []
    altered = gateway_policy(REF)
    altered["spec"]["ingress"] = []
    assert changed(desired, [desired[0], altered]) == [desired[1]]
    moved = network_policies(REF, OperatorConfig(operator_namespace="elsewhere"))
    assert changed(moved, desired) == [moved[0]]


def test_a_policy_read_back_from_the_api_is_unchanged() -> None:
    """What the kube client returns (model objects sanitized back to dicts) compares equal
    to what was built, so a steady reconcile writes nothing."""
    api = client.ApiClient()
    for policy in network_policies(REF, CFG):
        model = api._ApiClient__deserialize(policy, "V1NetworkPolicy")  # type: ignore[attr-defined]
        assert changed([policy], [api.sanitize_for_serialization(model)]) == []


def test_the_controller_keeps_the_policies_and_writes_them_once() -> None:
    cluster = FakeCluster()
    meta = {"name": REF.name, "namespace": REF.namespace, "generation": 1}
    spec = {"model": {"uri": MODEL_URI}, "replicas": 1}
    cluster.add(c.MD_KIND, {"kind": c.MD_KIND, "metadata": meta, "spec": spec})
    controller = Controller(cluster, CFG, FakeWorkers())  # type: ignore[arg-type]
    writes: list[str] = []
    apply = cluster.apply

    def counting(manifest: Manifest) -> None:
        if manifest["kind"] == "NetworkPolicy":
            writes.append(manifest["metadata"]["name"])
        apply(manifest)

    cluster.apply = counting  # type: ignore[method-assign]
    controller.reconcile(REF.namespace, REF.name)
    assert sorted(writes) == ["llama-gateway", "llama-workers"]
    controller.reconcile(REF.namespace, REF.name)
    assert len(writes) == 2  # nothing changed: nothing written
    del cluster.objects[("NetworkPolicy", REF.namespace, "llama-workers")]
    controller.reconcile(REF.namespace, REF.name)
    assert writes[2:] == ["llama-workers"]  # a deleted policy comes back


def test_policies_are_valid_kubernetes() -> None:
    floor = major_minor("1.20.0")
    version = str(min((v for v in all_versions() if major_minor(v) >= floor), key=major_minor))
    for policy in network_policies(REF, CFG):
        kubernetes_validate.validate(policy, version, strict=True)
