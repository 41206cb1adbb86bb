"""`helm install` onto the local cluster: the operator runs as a pod (through the node
agent, in its own network namespace, with its ServiceAccount token and least-privilege
RBAC) and reconciles a sample ModelDeployment to Available; the gateway answers through
`cascade dev url`. The sample then scales 1 -> 2 -> 1 and is deleted, and the API
server's audit log (the dev cluster records cascade-system's ServiceAccounts) must show
the operator refused nothing and using every verb its ClusterRole grants, but for the
documented few this run does not reach (RBAC trimmed to what is used)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration_helpers import helm_release

from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.helm]

ROOT = Path(__file__).resolve().parents[2]
RELEASE, NAMESPACE, APP_NS = "cascade", "cascade-system", "chart-it"


@pytest.fixture(scope="module")
def release(dev_cluster: DevCluster) -> Iterator[datetime]:
    """The chart installed; yields when the install began: the audit log is read from
    then on (an earlier release's uninstall, its operator still running as its RBAC
    goes, leaves refusals that are not this install's)."""
    began = datetime.now(UTC)
    with helm_release(dev_cluster, RELEASE, NAMESPACE):
        yield began
        dev_cluster.kubectl("delete", "namespace", APP_NS, "--wait=false", check=False)


def get(cluster: DevCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def test_chart_operator_pod_serves_a_model_deployment(
    dev_cluster: DevCluster, release: datetime
) -> None:
    pods = get(dev_cluster, "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=cascade")
    assert [p["status"]["phase"] for p in pods["items"]] == ["Running"]
    operator_pod = pods["items"][0]
    assert operator_pod["spec"]["nodeName"].startswith("cascade-node-")
    assert operator_pod["spec"]["serviceAccountName"] != "default"

    dev_cluster.kubectl("create", "namespace", APP_NS)
    sample = yaml.safe_load((ROOT / "examples/01-minimal/modeldeployment.yaml").read_text())
    sample["metadata"]["namespace"] = APP_NS
    dev_cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(sample))
    name = sample["metadata"]["name"]

    def available() -> bool:
        status = get(dev_cluster, "md", name, "-n", APP_NS).get("status") or {}
        return any(
            c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions", [])
        )

    wait_for("the sample to become Available", available)
    url = dev_cluster.url(f"{APP_NS}/{name}-gateway")
    with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as resp:
        models = json.load(resp)
    assert [m["id"] for m in models["data"]] == [sample["spec"]["model"].get("servedName", name)]


# Granted, but not reached by this run: (apiGroup, resource, verb) -> why it is needed.
UNEXERCISED = {
    ("", "pods", "get"): "the gateway's Role grants it (one grants only what one holds)",
    ("", "pods", "patch"): "role, plan and InferencePool-serving labels and annotations",
    ("batch", "jobs", "create"): "spec.materialization's profile Job",
    ("batch", "jobs", "delete"): "a profile Job replaced, or its deployment deleted",
    ("cascade.dev", "scaleplans", "delete"): "a plan superseded mid-flight",
    ("cascade.dev", "modeldeployments/scale", "patch"): "the Cascade autoscaler's writes",
    ("networking.k8s.io", "networkpolicies", "patch"): "a NetworkPolicy changed by hand",
    # The chart-install run has no Inference Extension CRD (test_inference_pool_cluster.py has).
    ("inference.networking.k8s.io", "inferencepools", "get"): "InferencePool CRD installed",
    ("inference.networking.k8s.io", "inferencepools", "create"): "InferencePool CRD installed",
    ("inference.networking.k8s.io", "inferencepools", "patch"): "an InferencePool changed",
    ("", "namespaces", "list"): "kopf, for watchNamespaces globs",
    ("", "namespaces", "watch"): "kopf, for watchNamespaces globs",
}


def audit_uses(
    dev: DevCluster, user: str, since: datetime
) -> tuple[set[tuple[str, str, str]], list[str]]:
    """(apiGroup, resource[/subresource], verb) the user's requests used since `since`;
    and refusals."""
    used: set[tuple[str, str, str]] = set()
    refused: list[str] = []
    log = dev.state_dir / "logs" / "audit.log"
    for line in log.read_text().splitlines() if log.is_file() else []:
        try:
            event = json.loads(line.strip("\x00"))
        except ValueError:  # a line cut by log rotation
            continue
        if (event.get("user") or {}).get("username") != user or "objectRef" not in event:
            continue
        if datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")) < since:
            continue
        ref, verb = event["objectRef"], event["verb"]
        resource = ref.get("resource", "") + (
            f"/{ref['subresource']}" if ref.get("subresource") else ""
        )
        key = (ref.get("apiGroup", ""), resource, verb)
        if (event.get("responseStatus") or {}).get("code") == 403:
            refused.append(str(key))
        used.add(key)
    # A watch is a long-running request, logged when it starts, which may be after this
    # read; kopf lists each kind right before watching it, so a list stands for both.
    used |= {(group, resource, "watch") for group, resource, verb in used if verb == "list"}
    return used, refused


def granted(dev: DevCluster) -> set[tuple[str, str, str]]:
    rules = get(dev, "clusterrole", RELEASE)["rules"]
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


def ready_instances(dev: DevCluster, name: str) -> int:
    selector = f"cascade.dev/deployment={name},app.kubernetes.io/component=worker"
    pods = get(dev, "pods", "-n", APP_NS, "-l", selector)["items"]
    conds = [p["status"].get("conditions") or [] for p in pods]
    return sum(any(c["type"] == "Ready" and c["status"] == "True" for c in cs) for cs in conds)


def test_the_operator_uses_what_its_role_grants_and_nothing_more(
    dev_cluster: DevCluster, release: datetime
) -> None:
    """After the test above (its sample still deployed): scale, shrink, delete, then read
    what the operator's ServiceAccount did."""
    sample = yaml.safe_load((ROOT / "examples/01-minimal/modeldeployment.yaml").read_text())
    name = sample["metadata"]["name"]
    dev_cluster.kubectl("scale", "md", name, "-n", APP_NS, "--replicas=2")
    wait_for("2 instances Ready", lambda: ready_instances(dev_cluster, name) == 2, timeout=240)
    dev_cluster.kubectl("scale", "md", name, "-n", APP_NS, "--replicas=1")
    wait_for("1 instance", lambda: ready_instances(dev_cluster, name) == 1, timeout=120)
    dev_cluster.kubectl("delete", "md", name, "-n", APP_NS, "--timeout=120s")
    operator = get(dev_cluster, "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=cascade")
    sa = operator["items"][0]["spec"]["serviceAccountName"]
    used, refused = audit_uses(dev_cluster, f"system:serviceaccount:{NAMESPACE}:{sa}", release)
    assert used, "no audit events for the operator (is the dev API server auditing?)"
    assert refused == []
    print("granted and used:", sorted(granted(dev_cluster) & used))
    unused = granted(dev_cluster) - used - set(UNEXERCISED)
    assert unused == set(), f"granted, never used (trim it, or say why in UNEXERCISED): {unused}"
