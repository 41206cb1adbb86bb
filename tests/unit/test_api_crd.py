"""The generated CRDs: committed files match the models, and kubectl sees the right shape.

The pydantic models are the single source of truth; the YAML in crds/ and the chart is
generated. A drift test keeps the two from diverging silently; the rest pins what users
see in `kubectl get` (printer columns, short names) and what the HPA needs (/scale).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cascade_api import constants as c
from cascade_api.crd import OUTPUT_DIRS, model_deployment_crd, rendered, scale_plan_crd
from cascade_api.invariants import cel_rules

ROOT = Path(__file__).resolve().parents[2]


def _version(crd: dict[str, Any]) -> dict[str, Any]:
    versions: list[dict[str, Any]] = crd["spec"]["versions"]
    assert len(versions) == 1
    return versions[0]


@pytest.mark.parametrize("folder", OUTPUT_DIRS, ids=str)
def test_committed_crds_match_models(folder: Path) -> None:
    fresh = rendered()
    committed = {p.name for p in (ROOT / folder).glob("*.yaml")}
    hint = "CRDs are stale: run `make crds` (python -m cascade_api.crd) and commit the result"
    assert committed == set(fresh), f"{folder}: files differ from the models. {hint}"
    for name, text in fresh.items():
        assert (ROOT / folder / name).read_text() == text, f"{folder}/{name} drifted. {hint}"


def test_rendered_yaml_parses_back_to_the_crd_dicts() -> None:
    docs = [yaml.safe_load(text) for text in rendered().values()]
    assert docs == [model_deployment_crd(), scale_plan_crd()]


def test_rendered_yaml_has_no_anchors() -> None:
    for name, text in rendered().items():
        assert "&id" not in text and "*id" not in text, name


@pytest.mark.parametrize(
    ("crd", "kind", "plural", "short"),
    [
        (model_deployment_crd(), c.MD_KIND, c.MD_PLURAL, "md"),
        (scale_plan_crd(), c.SP_KIND, c.SP_PLURAL, "sp"),
    ],
    ids=["ModelDeployment", "ScalePlan"],
)
def test_names(crd: dict[str, Any], kind: str, plural: str, short: str) -> None:
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{plural}.{c.GROUP}"
    names = crd["spec"]["names"]
    assert names["kind"] == kind
    assert names["plural"] == plural
    assert names["singular"] == kind.lower()
    assert names["shortNames"] == [short]
    assert "cascade" in names["categories"]
    assert crd["spec"]["scope"] == "Namespaced"
    version = _version(crd)
    assert version["name"] == c.VERSION
    assert version["served"] and version["storage"]


def test_model_deployment_printer_columns() -> None:
    columns = _version(model_deployment_crd())["additionalPrinterColumns"]
    assert [col["name"] for col in columns] == [
        "Model",
        "Desired",
        "Ready",
        "Loading",
        "Available",
        "Age",
    ]
    paths = {col["name"]: col["jsonPath"] for col in columns}
    assert paths["Model"] == ".spec.model.uri"
    assert paths["Desired"] == ".spec.replicas"
    assert paths["Ready"] == ".status.readyReplicas"
    assert paths["Loading"] == ".status.loadingReplicas"
    assert paths["Available"] == '.status.conditions[?(@.type=="Available")].status'
    assert paths["Age"] == ".metadata.creationTimestamp"
    types = {col["name"]: col["type"] for col in columns}
    assert types["Desired"] == types["Ready"] == types["Loading"] == "integer"
    assert types["Age"] == "date"


def test_scale_plan_printer_columns() -> None:
    columns = _version(scale_plan_crd())["additionalPrinterColumns"]
    assert [col["name"] for col in columns] == [
        "Deployment",
        "Strategy",
        "Targets",
        "Progress",
        "Phase",
        "Pipelines",
        "Predicted",
        "Measured",
        "Age",
    ]
    paths = {col["name"]: col["jsonPath"] for col in columns}
    assert paths["Deployment"] == ".spec.deployment"
    assert paths["Strategy"] == ".spec.strategy"
    assert paths["Targets"] == ".status.targetCount"
    assert paths["Progress"] == ".status.progress"
    assert paths["Phase"] == ".status.phase"
    assert paths["Pipelines"] == ".status.pipelineSummary"
    assert paths["Predicted"] == ".spec.predictedCompletionSeconds"
    assert paths["Measured"] == ".status.measuredCompletionSeconds"


@pytest.mark.parametrize("crd", [model_deployment_crd(), scale_plan_crd()], ids=["md", "sp"])
def test_printer_column_paths_exist_in_schema(crd: dict[str, Any]) -> None:
    """A column whose path the schema lacks would print <none> forever."""
    schema = _version(crd)["schema"]["openAPIV3Schema"]
    for col in _version(crd)["additionalPrinterColumns"]:
        node = schema
        for part in col["jsonPath"].lstrip(".").split("[")[0].split("."):
            if part == "metadata":
                break
            assert part in node.get("properties", {}), col
            node = node["properties"][part]


def test_model_deployment_subresources() -> None:
    sub = _version(model_deployment_crd())["subresources"]
    assert sub["status"] == {}
    assert sub["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    status = _version(model_deployment_crd())["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["properties"]["replicas"]["type"] == "integer"
    assert status["properties"]["selector"]["type"] == "string"


def test_scale_plan_has_status_but_no_scale() -> None:
    assert _version(scale_plan_crd())["subresources"] == {"status": {}}


def test_cel_rules_land_on_the_spec_schema() -> None:
    spec = _version(model_deployment_crd())["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["x-kubernetes-validations"] == cel_rules()
    assert spec["required"] == ["model"]
