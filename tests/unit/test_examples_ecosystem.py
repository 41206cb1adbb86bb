"""The ecosystem examples (06-hpa, 07-keda, 08-inference-pool) stay valid against the
schemas of what they plug into, and agree with Cascade: the HPA by kubernetes-validate's
strict schemas, the ScaledObject by KEDA's own CRD (vendored, tests/data/crds), each
ModelDeployment by our CRD; both autoscalers target the deployment's /scale and read
series the gateway exports; the pool in 08's README is the one the operator builds."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import all_versions, major_minor
from prometheus_client import CollectorRegistry
from test_inference_pool import unknown_fields

from cascade_api import constants as c
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaling import AutoscalerOwner
from cascade_gateway.config import GatewayConfig
from cascade_gateway.metrics import register_metrics
from cascade_operator.inference_pool import inference_pool
from cascade_operator.observed import MdRef

Body = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
VENDORED = ROOT / "tests" / "data" / "crds"
FOLDERS = ["06-hpa", "07-keda", "08-inference-pool"]


def manifests(folder: str) -> list[Body]:
    return [
        doc
        for path in sorted((EXAMPLES / folder).glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def one(folder: str, kind: str) -> Body:
    (doc,) = [d for d in manifests(folder) if d["kind"] == kind]
    return doc


def schema(crd_file: Path, version: str) -> Body:
    crd = yaml.safe_load(crd_file.read_text())
    (found,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    root: Body = found["schema"]["openAPIV3Schema"]
    return root


def readme_block(folder: str, marker: str) -> Any:
    """The YAML code block right after `<!-- marker -->` in the folder's README."""
    text = (EXAMPLES / folder / "README.md").read_text()
    found = re.search(rf"<!-- {marker} -->\s*```yaml\n(.*?)```", text, re.S)
    assert found, f"{folder}/README.md has no {marker} block"
    return yaml.safe_load(found.group(1))


def gateway_series() -> set[str]:
    registry = CollectorRegistry()
    config = GatewayConfig(host="", port=0, model_name="m", deployment="d", drain_seconds=0)
    register_metrics(registry, config)
    return {family.name for family in registry.collect()}


def series_in(query: str) -> set[str]:
    return set(re.findall(r"cascade_gateway_[a-z_]+", query))


def spec_of(md: Body) -> ModelDeploymentSpec:
    return ModelDeploymentSpec.model_validate(md["spec"])


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_deployment_is_valid_against_our_crd(folder: str) -> None:
    md = one(folder, c.MD_KIND)
    root = schema(ROOT / "crds" / "cascade.dev_modeldeployments.yaml", c.VERSION)
    jsonschema.validate(md, root)
    assert unknown_fields(md, root) == []


@pytest.mark.parametrize(
    ("folder", "kind"), [("06-hpa", "HorizontalPodAutoscaler"), ("07-keda", "ScaledObject")]
)
def test_the_autoscaler_owns_replicas_through_scale(folder: str, kind: str) -> None:
    md, scaler = one(folder, c.MD_KIND), one(folder, kind)
    spec = spec_of(md)
    assert spec.scaling.owner == AutoscalerOwner.EXTERNAL  # the operator never writes it
    assert scaler["spec"]["scaleTargetRef"] == {
        "apiVersion": c.API_VERSION,
        "kind": c.MD_KIND,
        "name": md["metadata"]["name"],
    }
    low = scaler["spec"].get("minReplicas", scaler["spec"].get("minReplicaCount"))
    high = scaler["spec"].get("maxReplicas", scaler["spec"].get("maxReplicaCount"))
    # The CEL rule on spec.replicas refuses a write outside the deployment's bounds.
    assert spec.scaling.min_replicas <= low <= spec.replicas <= high <= spec.scaling.upper


@pytest.mark.parametrize("which", ["oldest", "newest"])
def test_the_hpa_is_valid_kubernetes(which: str) -> None:
    floor = major_minor("1.23.0")  # autoscaling/v2 is GA from 1.23
    versions = sorted({v for v in all_versions() if major_minor(v) >= floor}, key=major_minor)
    version = versions[0] if which == "oldest" else versions[-1]
    kubernetes_validate.validate(one("06-hpa", "HorizontalPodAutoscaler"), str(version), True)


def test_the_hpa_reads_the_adapter_rule_of_its_readme() -> None:
    hpa, md = one("06-hpa", "HorizontalPodAutoscaler"), one("06-hpa", c.MD_KIND)
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"]["selector"]["matchLabels"] == {
        "deployment": md["metadata"]["name"]
    }
    (rule,) = readme_block("06-hpa", "adapter-rule")
    assert rule["name"]["as"] == metric["external"]["metric"]["name"]
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}}
    assert "<<.LabelMatchers>>" in rule["metricsQuery"]
    used = series_in(rule["seriesQuery"]) | series_in(rule["metricsQuery"])
    assert used == {"cascade_gateway_queue_depth", "cascade_gateway_in_flight"}
    assert used <= gateway_series()


def test_the_scaled_object_is_valid_against_kedas_crd() -> None:
    scaled = one("07-keda", "ScaledObject")
    root = schema(VENDORED / "keda.sh_scaledobjects.yaml", "v1alpha1")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    jsonschema.validate(scaled, root)
    assert unknown_fields(scaled, root) == []


def test_the_keda_trigger_reads_the_gateways_queue_of_this_deployment() -> None:
    scaled, md = one("07-keda", "ScaledObject"), one("07-keda", c.MD_KIND)
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    query = trigger["metadata"]["query"]
    assert f'deployment="{md["metadata"]["name"]}"' in query
    assert "cascade_gateway_queue_depth" in series_in(query) <= gateway_series()
    assert scaled["spec"]["minReplicaCount"] == 0 == spec_of(md).scaling.min_replicas


def test_the_pool_in_the_readme_is_the_one_the_operator_builds() -> None:
    md = one("08-inference-pool", c.MD_KIND)
    shown = readme_block("08-inference-pool", "built-pool")
    uid = shown["metadata"]["ownerReferences"][0]["uid"]
    ref = MdRef(name=md["metadata"]["name"], namespace="default", uid=uid)
    assert shown == inference_pool(ref, md["metadata"]["annotations"])
