"""RBAC is exactly the least-privilege set the operator needs: nothing more, no wildcards.

Rules are flattened to (apiGroup, resource, verb) triples, so the test does not care how
they are grouped into rule entries, only what they grant, and where.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.helm

Manifest = dict[str, Any]
Render = Callable[..., list[Manifest]]
NAMESPACE = "cascade-system"  # the namespace conftest renders into

Grant = tuple[str, str, str]


def grants(group: str, resources: list[str], verbs: list[str]) -> set[Grant]:
    return {(group, r, v) for r in resources for v in verbs}


READ = ["get", "list", "watch"]
WATCHED = ["list", "watch"]  # what kopf does with the kinds it handles

# Trimmed to what the operator's ServiceAccount is seen using in an audit of the
# chart-install integration run (tests/integration/test_chart_install.py).
NAMESPACED: set[Grant] = (
    # kopf patches its finalizer and annotations; the operator reads one to reconcile it.
    grants("cascade.dev", ["modeldeployments"], [*READ, "patch"])
    # Status writes (both kinds) and the autoscaler's /scale writes.
    | grants(
        "cascade.dev",
        ["modeldeployments/status", "modeldeployments/scale", "scaleplans/status"],
        ["patch"],
    )
    # deletecollection: deleting a ModelDeployment removes its ScalePlans in one call.
    | grants("cascade.dev", ["scaleplans"], [*WATCHED, "create", "delete", "deletecollection"])
    # get: the gateway's Role grants pods get/list/watch, and one grants only what one holds.
    | grants("", ["pods"], [*READ, "create", "delete", "patch"])
    | grants("", ["services"], ["get", "create", "patch", "delete"])
    | grants("apps", ["deployments"], [*READ, "create", "patch", "delete"])
    | grants("batch", ["jobs"], [*WATCHED, "create", "delete"])  # materialization's Job
    # Each gateway gets its own ServiceAccount and a pods-read Role (worker discovery).
    | grants("", ["serviceaccounts"], ["create", "patch", "delete"])
    | grants("rbac.authorization.k8s.io", ["roles", "rolebindings"], ["create", "patch", "delete"])
    # Each deployment's peer token: made once, read each reconcile, deleted with it.
    | grants("", ["secrets"], ["get", "create", "delete"])
    # One set of NetworkPolicies per deployment, kept as built (owner references delete them).
    | grants("networking.k8s.io", ["networkpolicies"], ["list", "create", "patch"])
    # One InferencePool per deployment where its CRD is served, kept like the policies.
    | grants("inference.networking.k8s.io", ["inferencepools"], ["get", "create", "patch"])
    | grants("", ["events"], ["create"])
)

CLUSTER_SCOPED: set[Grant] = (
    grants("apiextensions.k8s.io", ["customresourcedefinitions"], WATCHED)
    | grants("", ["namespaces"], WATCHED)  # kopf, for watchNamespaces globs
    | grants("", ["nodes"], ["list"])  # the planner's topology, the node-loss rule
)


def by_kind(docs: list[Manifest], kind: str) -> list[Manifest]:
    return [doc for doc in docs if doc.get("kind") == kind]


def flatten(role: Manifest) -> set[Grant]:
    out: set[Grant] = set()
    for rule in role["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "verbs"}, "no resourceNames/nonResourceURLs"
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}: {rule}"
        for group in rule["apiGroups"]:
            out |= grants(group, rule["resources"], rule["verbs"])
    return out


def test_all_namespaces_mode(render: Render) -> None:
    docs = render()
    [cluster_role] = by_kind(docs, "ClusterRole")
    assert flatten(cluster_role) == NAMESPACED | CLUSTER_SCOPED
    assert by_kind(docs, "Role") == []
    assert by_kind(docs, "RoleBinding") == []
    [binding] = by_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": cluster_role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "cascade", "namespace": NAMESPACE}
    ]


def test_watch_namespaces_mode(render: Render) -> None:
    docs = render("watchNamespaces={team-a,team-b}")
    [cluster_role] = by_kind(docs, "ClusterRole")
    assert flatten(cluster_role) == CLUSTER_SCOPED
    roles = {r["metadata"]["namespace"]: r for r in by_kind(docs, "Role")}
    assert set(roles) == {"team-a", "team-b"}
    for role in roles.values():
        assert flatten(role) == NAMESPACED
    bindings = {b["metadata"]["namespace"]: b for b in by_kind(docs, "RoleBinding")}
    assert set(bindings) == {"team-a", "team-b"}
    for ns, binding in bindings.items():
        assert binding["roleRef"]["kind"] == "Role"
        assert binding["roleRef"]["name"] == roles[ns]["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "cascade", "namespace": NAMESPACE}
        ]


def test_rbac_and_service_account_can_be_turned_off(render: Render) -> None:
    docs = render("rbac.create=false", "serviceAccount.create=false", "serviceAccount.name=ops")
    kinds = {doc["kind"] for doc in docs}
    assert kinds == {"Deployment"}
    [deployment] = docs
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "ops"
