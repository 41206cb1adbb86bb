"""The shipped examples stay valid (or, in 05-invalid, stay invalid) as the API evolves.

Examples are documentation users copy; a renamed field would otherwise rot them
silently. Valid ones must parse with the models and break no cross-field rule; each
manifest in 05-invalid must fail either model validation or an invariant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from cascade_api import constants as c
from cascade_api.invariants import violations
from cascade_api.modeldeployment import ModelDeploymentSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
INVALID = "05-invalid"


def folders() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if p.is_dir())


def deployments(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """(file name, manifest) of every ModelDeployment in the folder's YAML files."""
    out = []
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == c.MD_KIND:
                out.append((path.name, doc))
    return out


VALID = [
    (f"{f.name}/{name}", doc)
    for f in folders()
    if f.name != INVALID
    for name, doc in deployments(f)
]
BROKEN = deployments(EXAMPLES / INVALID)


def test_folders_are_numbered_and_documented() -> None:
    names = [f.name for f in folders()]
    assert names == [
        "01-minimal",
        "02-autoscaling",
        "03-pvc-model",
        "04-multicast",
        "05-invalid",
        "06-hpa",
        "07-keda",
        "08-inference-pool",
    ]
    index = (EXAMPLES / "README.md").read_text()
    for folder in folders():
        assert (folder / "README.md").is_file(), folder.name
        assert deployments(folder), f"{folder.name} has no ModelDeployment"
        assert folder.name in index, f"examples/README.md does not list {folder.name}"


@pytest.mark.parametrize(("name", "doc"), VALID, ids=[n for n, _ in VALID])
def test_valid_examples_parse_and_keep_the_invariants(name: str, doc: dict[str, Any]) -> None:
    assert doc["apiVersion"] == c.API_VERSION
    assert doc["metadata"]["name"]
    spec = ModelDeploymentSpec.model_validate(doc["spec"])
    assert violations(spec) == [], name


@pytest.mark.parametrize(("name", "doc"), BROKEN, ids=[n for n, _ in BROKEN])
def test_invalid_examples_fail_validation_or_an_invariant(name: str, doc: dict[str, Any]) -> None:
    try:
        spec = ModelDeploymentSpec.model_validate(doc["spec"])
    except ValidationError:
        return
    assert violations(spec), f"{name} should be rejected but is valid"


def test_invalid_examples_fail_for_the_documented_reason() -> None:
    broken = dict(BROKEN)
    assert set(broken) == {
        "wrong-type.yaml", "out-of-range.yaml", "min-greater-than-max.yaml", "escaping-path.yaml"
    }  # fmt: skip
    for name, loc in [
        ("wrong-type.yaml", ("replicas",)),
        ("out-of-range.yaml", ("replicas",)),
        ("escaping-path.yaml", ("model", "uri")),
    ]:
        with pytest.raises(ValidationError) as err:
            ModelDeploymentSpec.model_validate(broken[name]["spec"])
        assert [e["loc"] for e in err.value.errors()] == [loc]
    spec = ModelDeploymentSpec.model_validate(broken["min-greater-than-max.yaml"]["spec"])
    assert violations(spec)[0].field == "spec.scaling.minReplicas"


def test_minimal_example_is_minimal() -> None:
    ((_, doc),) = deployments(EXAMPLES / "01-minimal")
    assert doc["spec"] == {
        "model": {"uri": "file:///var/lib/cascade/models/smollm2-135m-instruct"},
        "replicas": 1,
    }


def test_pvc_example_claims_the_volume_its_uri_names() -> None:
    docs = [
        d
        for p in sorted((EXAMPLES / "03-pvc-model").glob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
    ]
    claims = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    ((_, md),) = deployments(EXAMPLES / "03-pvc-model")
    spec = ModelDeploymentSpec.model_validate(md["spec"])
    assert spec.model.uri == "pvc://models/llama-3-8b"
    assert spec.model.uri.removeprefix("pvc://").split("/")[0] in claims
    assert spec.instance.gpus == 2
    assert c.LABEL_GPU_PRODUCT in spec.instance.node_selector
    assert spec.instance.tolerations
