"""The chart's opt-in monitors and Grafana dashboard (monitoring.* values).

Off by default, nothing renders; each switch renders only its objects; PodMonitors and
ServiceMonitors validate against the real prometheus-operator CRD schemas (schemas/,
README there: unknown fields rejected as strict field validation would) and select the
pods and Services the operator builds (its own label builders); the dashboard ConfigMap
carries the JSON file unchanged.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import all_versions, major_minor

from cascade_api import constants as c
from cascade_operator.builders import gateway_service, labels
from cascade_operator.observed import MdRef

pytestmark = pytest.mark.helm

Manifest = dict[str, Any]
Render = Callable[..., list[Manifest]]
RenderError = Callable[..., str]

HERE = Path(__file__).resolve().parent
CHART = HERE.parents[1] / "charts" / "cascade"
SCHEMAS = HERE / "schemas"
NAMESPACE = "cascade-system"  # the namespace conftest renders into
SCHEMA_ERROR = "values don't meet the specifications of the schema"

PODS = "monitoring.podMonitors.enabled=true"
SERVICES = "monitoring.serviceMonitors.enabled=true"
DASHBOARDS = "monitoring.dashboards.enabled=true"
MONITOR_KINDS = ("PodMonitor", "ServiceMonitor")
MD = MdRef(name="llama", namespace="team-a", uid="u-1")


# --- helpers


@cache
def crd_schema(kind: str) -> dict[str, Any]:
    """The v1 openAPIV3Schema of a vendored CRD, made strict: every object schema that
    lists its properties accepts no others (the API server's strict field validation)."""
    plural = {"PodMonitor": "podmonitors", "ServiceMonitor": "servicemonitors"}[kind]
    crd = yaml.safe_load((SCHEMAS / f"monitoring.coreos.com_{plural}.yaml").read_text())
    assert crd["spec"]["names"]["kind"] == kind
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = strict(version["schema"]["openAPIV3Schema"])
    jsonschema.Draft7Validator.check_schema(schema)
    return schema


def strict(schema: Any) -> Any:
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if "properties" in schema:
        out["properties"] = {k: strict(v) for k, v in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
    return out


def validate_monitor(doc: Manifest) -> None:
    errors = sorted(
        jsonschema.Draft7Validator(crd_schema(doc["kind"])).iter_errors(doc),
        key=lambda e: list(e.absolute_path),
    )
    where = f"{doc['kind']}/{doc['metadata']['name']}"
    assert not errors, f"{where}: " + "; ".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]
    )


def k8s_version() -> str:
    """The nearest schema version to Kubernetes 1.20 that kubernetes-validate ships."""
    floor = major_minor("1.20.0")
    return str(min((v for v in all_versions() if major_minor(v) >= floor), key=major_minor))


def validate_builtin(doc: Manifest) -> None:
    try:
        kubernetes_validate.validate(doc, k8s_version(), strict=True)
    except kubernetes_validate.ValidationError as err:
        first = "\n".join(str(err).splitlines()[:3])
        pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} invalid: {first}")


def validate(docs: Iterable[Manifest]) -> None:
    for doc in docs:
        if doc["kind"] in MONITOR_KINDS:
            validate_monitor(doc)
        else:
            validate_builtin(doc)


def by_kind(docs: list[Manifest], kind: str) -> dict[str, Manifest]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def added(render: Render, *values: str) -> list[Manifest]:
    """What the values render on top of the default render."""
    default = {(d["kind"], d["metadata"]["name"]) for d in render()}
    return [d for d in render(*values) if (d["kind"], d["metadata"]["name"]) not in default]


def kinds(docs: list[Manifest]) -> list[tuple[str, str]]:
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs)


def selects(selector: Manifest, pod_labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector's verdict on a label set."""
    if any(pod_labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in pod_labels and pod_labels[key] in values,
            "NotIn": pod_labels.get(key) not in values,
            "Exists": key in pod_labels,
            "DoesNotExist": key not in pod_labels,
        }[op]
        if not ok:
            return False
    return True


def meta_label(role: str, label: str) -> str:
    """Prometheus' kubernetes_sd meta label of a Kubernetes label."""
    return f"__meta_kubernetes_{role}_label_" + re.sub(r"[^A-Za-z0-9_]", "_", label)


def endpoints(monitor: Manifest) -> list[Manifest]:
    spec = monitor["spec"]
    found: list[Manifest] = spec.get("podMetricsEndpoints") or spec.get("endpoints") or []
    return found


def operator_pod(docs: list[Manifest]) -> Manifest:
    [deployment] = by_kind(docs, "Deployment").values()
    pod: Manifest = deployment["spec"]["template"]
    return pod


WORKLOAD = {comp: labels(MD.name, comp) for comp in ("worker", "host-copy", "gateway")}


# --- off and on


def test_nothing_renders_by_default(render: Render) -> None:
    docs = render()
    assert not [d for d in docs if d["kind"] in {*MONITOR_KINDS, "ConfigMap", "Service"}]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (PODS, [("PodMonitor", "cascade-operator"), ("PodMonitor", "cascade-workloads")]),
        (
            SERVICES,
            [
                ("Service", "cascade-operator-metrics"),
                ("ServiceMonitor", "cascade-gateways"),
                ("ServiceMonitor", "cascade-operator"),
            ],
        ),
        (DASHBOARDS, [("ConfigMap", "cascade-dashboard")]),
    ],
)
def test_each_switch_renders_only_its_objects(
    render: Render, value: str, expected: list[tuple[str, str]]
) -> None:
    docs = added(render, value)
    assert kinds(docs) == expected
    validate(docs)


def test_switched_off_explicitly_renders_none(render: Render) -> None:
    off = [v.replace("=true", "=false") for v in (PODS, SERVICES, DASHBOARDS)]
    assert added(render, *off) == []


@pytest.mark.parametrize(
    "values",
    [
        [PODS, SERVICES, DASHBOARDS],
        [
            PODS,
            SERVICES,
            "watchNamespaces={team-a,team-b}",
            "monitoring.namespace=monitoring",
            "monitoring.labels.release=kube-prometheus-stack",
            "monitoring.interval=15s",
            "monitoring.scrapeTimeout=10s",
        ],
        [PODS, "monitoring.interval=1m30s"],
    ],
)
def test_rendered_objects_validate(render: Render, values: list[str]) -> None:
    docs = added(render, *values)
    assert {d["kind"] for d in docs} >= {"PodMonitor"}
    validate(docs)


def test_the_crd_schemas_catch_a_bad_monitor(render: Render) -> None:
    [monitor] = [d for d in added(render, PODS) if d["metadata"]["name"].endswith("-operator")]
    monitor["spec"]["podMetricsEndpoints"][0]["intervall"] = "30s"
    with pytest.raises(AssertionError, match="intervall"):
        validate_monitor(monitor)
    del monitor["spec"]["selector"]
    with pytest.raises(AssertionError, match="'selector' is a required property"):
        validate_monitor(monitor)


def test_lint_strict_with_everything_on(helm: str) -> None:
    args = [helm, "lint", "--strict", str(CHART)]
    for value in (PODS, SERVICES, DASHBOARDS, "monitoring.labels.release=prom"):
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


# --- what the monitors select


def test_pod_monitors_select_the_operators_workloads_anywhere(render: Render) -> None:
    monitors = by_kind(render(PODS), "PodMonitor")
    workloads = monitors["cascade-workloads"]["spec"]
    assert workloads["namespaceSelector"] == {"any": True}
    for comp, pod_labels in WORKLOAD.items():
        assert selects(workloads["selector"], pod_labels), comp
    assert not selects(workloads["selector"], labels(MD.name, c.COMPONENT_MATERIALIZE))
    [endpoint] = endpoints(monitors["cascade-workloads"])
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert not endpoint.get("honorLabels")  # `namespace` is the pod's


def test_the_operator_pod_monitor_selects_only_the_operator(render: Render) -> None:
    docs = render(PODS)
    monitor = by_kind(docs, "PodMonitor")["cascade-operator"]
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert selects(spec["selector"], operator_pod(docs)["metadata"]["labels"])
    assert not any(selects(spec["selector"], pod) for pod in WORKLOAD.values())
    [endpoint] = endpoints(monitor)
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
    # The operator's series name their ModelDeployment's namespace and deployment.
    assert endpoint["honorLabels"] is True


def test_deployment_label_is_relabeled_from_the_pods_and_services(render: Render) -> None:
    docs = render(PODS, "monitoring.serviceMonitors.enabled=false")
    [workloads_endpoint] = endpoints(by_kind(docs, "PodMonitor")["cascade-workloads"])
    targets = {r["targetLabel"]: r["sourceLabels"] for r in workloads_endpoint["relabelings"]}
    assert targets["deployment"] == [meta_label("pod", c.LABEL_DEPLOYMENT)]
    assert targets["component"] == [meta_label("pod", c.LABEL_COMPONENT)]
    [gateway_endpoint] = endpoints(by_kind(render(SERVICES), "ServiceMonitor")["cascade-gateways"])
    targets = {r["targetLabel"]: r["sourceLabels"] for r in gateway_endpoint["relabelings"]}
    assert targets["deployment"] == [meta_label("service", c.LABEL_DEPLOYMENT)]


def test_service_monitors_select_the_gateway_services_and_the_metrics_service(
    render: Render,
) -> None:
    docs = render(SERVICES)
    monitors = by_kind(docs, "ServiceMonitor")
    gateway = gateway_service(MD)
    gateways = monitors["cascade-gateways"]
    assert gateways["spec"]["namespaceSelector"] == {"any": True}
    assert selects(gateways["spec"]["selector"], gateway["metadata"]["labels"])
    [endpoint] = endpoints(gateways)
    assert endpoint["port"] in {p["name"] for p in gateway["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"

    service = by_kind(docs, "Service")["cascade-operator-metrics"]
    operator = monitors["cascade-operator"]
    assert operator["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert selects(operator["spec"]["selector"], service["metadata"]["labels"])
    assert not selects(gateways["spec"]["selector"], service["metadata"]["labels"])
    assert not selects(operator["spec"]["selector"], gateway["metadata"]["labels"])
    [endpoint] = endpoints(operator)
    assert endpoint["honorLabels"] is True
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert service["metadata"]["namespace"] == NAMESPACE
    assert selects(
        {"matchLabels": service["spec"]["selector"]}, operator_pod(docs)["metadata"]["labels"]
    )


def test_the_operator_container_has_the_metrics_port(render: Render) -> None:
    """Both operator monitors scrape the container port named `metrics` (8081,
    docs/observability.md)."""
    docs = render(SERVICES)
    [container] = operator_pod(docs)["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert ports.get("metrics") == 8081, f"operator container ports: {ports}"
    [port] = by_kind(docs, "Service")["cascade-operator-metrics"]["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (8081, "metrics")


def test_with_both_kinds_every_target_is_scraped_once(render: Render) -> None:
    docs = render(PODS, SERVICES)
    pod_monitors = by_kind(docs, "PodMonitor")
    service_monitors = by_kind(docs, "ServiceMonitor")
    assert sorted(pod_monitors) == ["cascade-workloads"]  # the operator: via its Service
    assert sorted(service_monitors) == ["cascade-gateways", "cascade-operator"]
    selector = pod_monitors["cascade-workloads"]["spec"]["selector"]
    assert selects(selector, WORKLOAD["worker"])
    assert selects(selector, WORKLOAD["host-copy"])
    assert not selects(selector, WORKLOAD["gateway"])  # via the gateway Service


def test_watch_namespaces_narrow_the_workload_monitors(render: Render) -> None:
    docs = render(PODS, SERVICES, "watchNamespaces={team-a,team-b}")
    workloads = by_kind(docs, "PodMonitor")["cascade-workloads"]
    gateways = by_kind(docs, "ServiceMonitor")["cascade-gateways"]
    for monitor in (workloads, gateways):
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["team-a", "team-b"]}
    assert by_kind(docs, "ServiceMonitor")["cascade-operator"]["spec"]["namespaceSelector"] == {
        "matchNames": [NAMESPACE]
    }


def test_labels_namespace_and_intervals_reach_every_monitor(render: Render) -> None:
    docs = added(
        render,
        PODS,
        SERVICES,
        "monitoring.labels.release=kube-prometheus-stack",
        "monitoring.namespace=monitoring",
        "monitoring.interval=15s",
        "monitoring.scrapeTimeout=5s",
    )
    monitors = [d for d in docs if d["kind"] in MONITOR_KINDS]
    assert len(monitors) == 3
    for monitor in monitors:
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert monitor["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert monitor["metadata"]["namespace"] == "monitoring"
        for endpoint in endpoints(monitor):
            assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("15s", "5s")
    # The Service stays with the operator; only the monitors move.
    assert (
        by_kind(docs, "Service")["cascade-operator-metrics"]["metadata"]["namespace"] == NAMESPACE
    )


def test_no_interval_means_the_prometheus_default(render: Render) -> None:
    for monitor in [d for d in render(PODS, SERVICES) if d["kind"] in MONITOR_KINDS]:
        for endpoint in endpoints(monitor):
            assert "interval" not in endpoint
            assert "scrapeTimeout" not in endpoint


# --- the dashboard


def test_dashboard_configmap_ships_the_json_for_the_sidecar(render: Render) -> None:
    [configmap] = by_kind(render(DASHBOARDS), "ConfigMap").values()
    assert configmap["metadata"]["namespace"] == NAMESPACE
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "annotations" not in configmap["metadata"]
    shipped = (CHART / "dashboards" / "cascade.json").read_text()
    assert list(configmap["data"]) == ["cascade.json"]
    assert json.loads(configmap["data"]["cascade.json"]) == json.loads(shipped)
    assert configmap["data"]["cascade.json"] == shipped.rstrip("\n")


def test_dashboard_sidecar_label_namespace_and_annotations(render: Render) -> None:
    docs = render(
        DASHBOARDS,
        "monitoring.dashboards.label=grafana.example.com/dashboard",
        "monitoring.dashboards.labelValue=cascade",
        "monitoring.dashboards.namespace=grafana",
        "monitoring.dashboards.labels.team=ml",
        "monitoring.dashboards.annotations.grafana_folder=Cascade",
    )
    [configmap] = by_kind(docs, "ConfigMap").values()
    validate_builtin(configmap)
    meta = configmap["metadata"]
    assert meta["namespace"] == "grafana"
    assert meta["labels"]["grafana.example.com/dashboard"] == "cascade"
    assert meta["labels"]["team"] == "ml"
    assert "grafana_dashboard" not in meta["labels"]
    assert meta["annotations"] == {"grafana_folder": "Cascade"}
    assert not [d for d in docs if d["kind"] in MONITOR_KINDS]


# --- values.schema.json


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("monitoring.podMonitors.enabled=yes", "monitoring.podMonitors.enabled: Invalid type"),
        ("monitoring.podMonitor.enabled=true", "Additional property podMonitor is not allowed"),
        ("monitoring.serviceMonitors.interval=1m", "Additional property interval is not allowed"),
        ("monitoring.interval=30 seconds", "monitoring.interval: Does not match pattern"),
        ("monitoring.scrapeTimeout=10", "monitoring.scrapeTimeout: Invalid type"),
        ("monitoring.namespace=Monitoring", "monitoring.namespace: Does not match pattern"),
        ("monitoring.labels.release=kube prometheus", "monitoring.labels.release"),
        ("monitoring.dashboards.labelValue=1", "monitoring.dashboards.labelValue: Invalid type"),
        ("monitoring.dashboards.label=grafana dashboard", "monitoring.dashboards.label"),
        ("monitoring.dashboards.folder=x", "Additional property folder is not allowed"),
    ],
)
def test_bad_monitoring_values_are_rejected(
    render_error: RenderError, value: str, message: str
) -> None:
    error = render_error(value)
    assert SCHEMA_ERROR in error
    assert message in error
