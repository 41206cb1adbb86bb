"""The chart lints, renders, and every rendered object is valid Kubernetes (offline).

Validation uses kubernetes-validate's strict schemas (unknown fields are errors) for the
oldest Kubernetes version it ships that is not older than 1.20, the version the local
cluster runs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import all_versions, major_minor
from security_rules import violations

from cascade_api import constants as c

pytestmark = pytest.mark.helm

Manifest = dict[str, Any]
Render = Callable[..., list[Manifest]]

CHART = Path(__file__).resolve().parents[2] / "charts" / "cascade"
NAMESPACE = "cascade-system"  # the namespace conftest renders into

NAMESPACED = ["watchNamespaces={team-a,team-b}"]
STANDARD_LABELS = {
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
}


def k8s_version() -> str:
    """The nearest schema version to Kubernetes 1.20 that kubernetes-validate ships."""
    floor = major_minor("1.20.0")
    return str(min((v for v in all_versions() if major_minor(v) >= floor), key=major_minor))


def validate_all(docs: list[Manifest]) -> None:
    version = k8s_version()
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            first = "\n".join(str(err).splitlines()[:3])  # the rest is the whole schema
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} invalid for {version}: {first}")


def by_kind(docs: list[Manifest], kind: str) -> list[Manifest]:
    return [doc for doc in docs if doc.get("kind") == kind]


def operator_deployment(docs: list[Manifest]) -> Manifest:
    [deployment] = by_kind(docs, "Deployment")
    return deployment


@pytest.mark.parametrize("values", [[], NAMESPACED])
def test_lint_strict(helm: str, values: list[str]) -> None:
    args = [helm, "lint", "--strict", str(CHART)] + [a for v in values for a in ("--set", v)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_default_render_is_valid(render: Render) -> None:
    docs = render()
    assert sorted(doc["kind"] for doc in docs) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "ServiceAccount",
    ]
    validate_all(docs)


def test_namespaced_render_is_valid(render: Render) -> None:
    docs = render(*NAMESPACED)
    assert sorted(doc["kind"] for doc in docs) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Role",
        "Role",
        "RoleBinding",
        "RoleBinding",
        "ServiceAccount",
    ]
    assert sorted(d["metadata"]["namespace"] for d in by_kind(docs, "Role")) == [
        "team-a",
        "team-b",
    ]
    validate_all(docs)


def test_render_with_every_optional_value_is_valid(render: Render) -> None:
    docs = render(
        "imagePullSecrets[0].name=regcred",
        "serviceAccount.annotations.example\\.com/role=operator",
        "podLabels.team=ml",
        "priorityClassName=system-cluster-critical",
        "nodeSelector.kubernetes\\.io/os=linux",
        "tolerations[0].key=dedicated",
        "tolerations[0].operator=Equal",
        "tolerations[0].value=ops",
        "tolerations[0].effect=NoSchedule",
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].key=kubernetes.io/arch",
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].operator=In",
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].values[0]=amd64",
        "env[0].name=CASCADE_RESYNC_SECONDS",
        "verbose=true",
        # Strings that look like numbers/booleans need --set-string (the schema says so).
        extra=[
            "--set-string",
            "env[0].value=60",
            "--set-string",
            "podAnnotations.prometheus\\.io/scrape=false",
        ],
    )
    validate_all(docs)
    spec = operator_deployment(docs)["spec"]["template"]["spec"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["tolerations"][0]["key"] == "dedicated"
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    container = spec["containers"][0]
    assert {"name": "CASCADE_RESYNC_SECONDS", "value": "60"} in container["env"]
    assert "--verbose" in container["args"]
    template = operator_deployment(docs)["spec"]["template"]["metadata"]
    assert template["annotations"] == {  # the user's value wins over the chart's "true"
        "prometheus.io/scrape": "false",
        "prometheus.io/port": "8081",
        "prometheus.io/path": "/metrics",
    }
    assert template["labels"]["team"] == "ml"


def test_crds_ship_with_the_chart_and_are_valid(render: Render) -> None:
    crd_dir = CHART / "crds"
    files = sorted(p.name for p in crd_dir.glob("*.yaml")) if crd_dir.is_dir() else []
    if not files:
        pytest.skip("charts/cascade/crds/ is empty: run `make crds` first")
    assert files == [f"{c.GROUP}_{c.MD_PLURAL}.yaml", f"{c.GROUP}_{c.SP_PLURAL}.yaml"]
    crds = by_kind(render(extra=["--include-crds"]), "CustomResourceDefinition")
    assert sorted(crd["metadata"]["name"] for crd in crds) == [
        f"{c.MD_PLURAL}.{c.GROUP}",
        f"{c.SP_PLURAL}.{c.GROUP}",
    ]
    validate_all(crds)


def test_standard_labels_everywhere(render: Render) -> None:
    for doc in render(*NAMESPACED):
        labels = doc["metadata"]["labels"]
        assert set(labels) >= STANDARD_LABELS, doc["kind"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"] == "0.1.0"


def test_operator_deployment_defaults(render: Render) -> None:
    deployment = operator_deployment(render())
    assert deployment["metadata"]["namespace"] == NAMESPACE
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]
    assert set(spec["selector"]["matchLabels"].items()) <= set(pod["metadata"]["labels"].items())
    [container] = pod["spec"]["containers"]
    assert container["image"] == c.OPERATOR_IMAGE
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["args"] == ["--all-namespaces", "--liveness-port=8080", "--metrics-port=8081"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CASCADE_WORKER_IMAGE"] == c.WORKER_IMAGE
    assert env["CASCADE_GATEWAY_IMAGE"] == c.GATEWAY_IMAGE
    assert env["CASCADE_MODEL_ROOTS"] == "/var/lib/cascade/models"
    probe = container["livenessProbe"]["httpGet"]
    assert probe["path"] == c.HEALTH_PATH
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[probe["port"]] == 8080
    assert container["resources"]["requests"]
    assert pod["spec"]["serviceAccountName"] == "cascade"


def test_model_roots_reach_the_operator(render: Render) -> None:
    deployment = operator_deployment(render("models.fileRoots={/data/a,/mnt/b}"))
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CASCADE_MODEL_ROOTS"] == "/data/a,/mnt/b"


def test_security_context_is_restricted(render: Render) -> None:
    deployment = operator_deployment(render())
    assert violations(deployment) == []  # the Pod Security Standard, control by control
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's USER
    [container] = pod["containers"]
    ctx: dict[str, Any] = container["securityContext"]
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert ctx["readOnlyRootFilesystem"] is True


def test_read_only_root_gets_a_writable_scratch_dir(render: Render) -> None:
    pod = operator_deployment(render())["spec"]["template"]["spec"]
    [container] = pod["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/var/tmp/cascade"]]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TMPDIR"] == env["HOME"] == "/var/tmp/cascade"
    # Not over /tmp: the local cluster's node agent bind-mounts volumes over host paths,
    # and a state directory under /tmp (CI's) holds the pod's other volumes.
    assert "/tmp" not in mounts
    docs = render("securityContext.readOnlyRootFilesystem=false")
    validate_all(docs)
    assert "volumes" not in operator_deployment(docs)["spec"]["template"]["spec"]


def test_the_operator_names_its_own_pods_for_network_policies(render: Render) -> None:
    """CASCADE_OPERATOR_POD_LABELS select the operator's pods (and only by stable labels:
    no chart version), and its namespace is the pod's own."""
    pod = operator_deployment(render())["spec"]["template"]
    [container] = pod["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    raw = env["CASCADE_OPERATOR_POD_LABELS"]["value"]
    wanted = dict(term.split("=", 1) for term in raw.split(","))
    assert wanted == {
        "app.kubernetes.io/name": "cascade",
        "app.kubernetes.io/instance": "cascade",
        "app.kubernetes.io/component": "operator",
    }
    assert wanted.items() <= pod["metadata"]["labels"].items()
    namespace = env["CASCADE_OPERATOR_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert namespace == "metadata.namespace"


def test_rdma_is_off_unless_a_resource_is_named(render: Render) -> None:
    def rdma_env(*values: str) -> dict[str, str]:
        [container] = operator_deployment(render(*values))["spec"]["template"]["spec"]["containers"]
        return {e["name"]: e["value"] for e in container["env"] if "RDMA" in e["name"]}

    assert rdma_env() == {"CASCADE_RDMA_RESOURCE": "", "CASCADE_RDMA_COUNT": "1"}
    assert rdma_env("rdma.resourceName=rdma/rdma_shared_device_a", "rdma.count=2") == {
        "CASCADE_RDMA_RESOURCE": "rdma/rdma_shared_device_a",
        "CASCADE_RDMA_COUNT": "2",
    }


def test_the_planner_hop_latency_becomes_env(render: Render, tmp_path: Path) -> None:
    def hop_env(extra: Sequence[str] = ()) -> dict[str, str]:
        manifests = render(extra=extra)
        [container] = operator_deployment(manifests)["spec"]["template"]["spec"]["containers"]
        return {
            e["name"]: e["value"]
            for e in container["env"]
            if "HOP" in e["name"] or "STEP" in e["name"]
        }

    assert hop_env() == {"CASCADE_HOP_LATENCY_S": "0", "CASCADE_HOP_LEARN": "true"}
    fitted = tmp_path / "planner.yaml"  # --set would pass 0.02 as a string
    fitted.write_text(
        "planner: {hopLatencySeconds: 0, stepLatencySeconds: 0.007, learnHopLatency: false}\n"
    )
    assert hop_env(["-f", str(fitted)]) == {
        "CASCADE_HOP_LATENCY_S": "0",
        "CASCADE_STEP_LATENCY_S": "0.007",
        "CASCADE_HOP_LEARN": "false",
    }


def test_watch_namespaces_become_args(render: Render) -> None:
    container = operator_deployment(render(*NAMESPACED))["spec"]["template"]["spec"]["containers"][
        0
    ]
    assert container["args"] == [
        "--namespace=team-a",
        "--namespace=team-b",
        "--liveness-port=8080",
        "--metrics-port=8081",
    ]


def test_image_overrides(render: Render) -> None:
    deployment = operator_deployment(
        render(
            "image.operator.repository=registry.local:5000/cascade-operator",
            "image.operator.tag=dev",
            "image.operator.pullPolicy=Never",
            "image.worker.tag=e2e",
            "image.gateway.repository=registry.local:5000/gw",
        )
    )
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.local:5000/cascade-operator:dev"
    assert container["imagePullPolicy"] == "Never"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CASCADE_WORKER_IMAGE"] == "ghcr.io/cascade-dev/cascade-worker:e2e"
    assert env["CASCADE_GATEWAY_IMAGE"] == "registry.local:5000/gw:0.1.0"


def test_chart_metadata() -> None:
    chart = yaml.safe_load(Path(CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == c.DEFAULT_TAG
    assert (CHART / "values.schema.json").is_file()
    assert (CHART / "templates" / "NOTES.txt").is_file()
