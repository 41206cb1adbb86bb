"""Schema defaults and model defaults agree, checked by playing the API server's part.

Users' manifests are defaulted twice: by the API server from the CRD schema when stored,
and by pydantic when the operator parses them. If the two disagreed, `kubectl get -o
yaml` would show one value and the operator act on another. The helpers below redo, in
a few lines, what the apiserver does with a structural schema (defaulting, as in
apiextensions-apiserver's `structuraldefaulting.Default`, and OpenAPI validation of
types, bounds, enums and patterns) so the comparison runs without a cluster.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cascade_api.crd import model_deployment_crd, scale_plan_crd
from cascade_api.modeldeployment import ModelDeploymentSpec, ModelDeploymentStatus
from cascade_api.scaleplan import ScalePlanSpec, ScalePlanStatus

Schema = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MINIMAL: dict[str, Any] = {"model": {"uri": "file:///var/lib/cascade/models/tiny-llama"}}


def _schema(crd: dict[str, Any], part: str) -> Schema:
    node: Schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][part]
    return node


MD_SPEC, MD_STATUS = (
    _schema(model_deployment_crd(), "spec"),
    _schema(model_deployment_crd(), "status"),
)
SP_SPEC, SP_STATUS = _schema(scale_plan_crd(), "spec"), _schema(scale_plan_crd(), "status")


def apply_defaults(value: Any, schema: Schema) -> Any:
    """Fill absent fields (and nulls in non-nullable ones) from `default`, then recurse,
    also into defaults just set, e.g. `default: {}` on a parent of defaulted fields."""
    if isinstance(value, dict):
        props: dict[str, Schema] = schema.get("properties", {})
        for name, prop in props.items():
            absent = name not in value or (value[name] is None and not prop.get("nullable"))
            if "default" in prop and absent:
                value[name] = copy.deepcopy(prop["default"])
        extra = schema.get("additionalProperties")
        for name, inner in value.items():
            if name in props:
                apply_defaults(inner, props[name])
            elif isinstance(extra, dict):
                apply_defaults(inner, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for inner in value:
            apply_defaults(inner, schema["items"])
    return value


def schema_errors(value: Any, schema: Schema, path: str = "spec") -> list[str]:
    """What OpenAPI validation of a structural schema reports (unknown fields are pruned)."""
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: must not be null"]
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, int | str) and not isinstance(value, bool)
        return [] if ok else [f"{path}: must be an integer or a string"]
    kinds: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool,
                             "integer": int, "number": int | float}  # fmt: skip
    type_ = schema["type"]
    if not isinstance(value, kinds[type_]) or (isinstance(value, bool) and type_ != "boolean"):
        return [f"{path}: must be of type {type_}"]
    errors = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: must be one of {schema['enum']}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: must match {schema['pattern']}")
    low, high = schema.get("minimum", value), schema.get("maximum", value)
    if type_ in ("integer", "number") and not low <= value <= high:
        errors.append(f"{path}: out of range")
    if type_ == "string" and value == "":
        errors.append(f"{path}: empty string (1.20 reads it as null)")
    if type_ == "string" and len(value) > schema.get("maxLength", len(value)):
        errors.append(f"{path}: too long")
    if type_ == "array":
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: too few items")
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    if type_ == "object":
        errors += [f"{path}.{r}: required" for r in schema.get("required", []) if r not in value]
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for name, inner in value.items():
            if name in props:
                errors += schema_errors(inner, props[name], f"{path}.{name}")
            elif isinstance(extra, dict):
                errors += schema_errors(inner, extra, f"{path}.{name}")
    return errors


def drop_empty(value: Any) -> Any:
    """Remove empty lists, maps and strings, recursively: the schema defaults scalars and
    parent objects, not `default_factory` collections (nor, on 1.20, empty strings), so
    those are absent on the server's side where the model has an empty value."""
    if isinstance(value, dict):
        pairs = ((k, drop_empty(v)) for k, v in value.items())
        return {k: v for k, v in pairs if v not in ({}, [], "")}
    if isinstance(value, list):
        return [drop_empty(v) for v in value]
    return value


def test_minimal_manifest_gets_the_documented_defaults() -> None:
    spec = apply_defaults(copy.deepcopy(MINIMAL), MD_SPEC)
    assert spec["replicas"] == 1
    assert spec["scaling"]["minReplicas"] == 1
    # No maxReplicas: a fixed count that kubectl scale owns (autoscaler unset -> External).
    assert "maxReplicas" not in spec["scaling"] and "autoscaler" not in spec["scaling"]
    assert spec["scaling"]["keepAliveSeconds"] == 300
    assert spec["scaling"]["interactiveBackpressure"] == {"tolerance": 0.1}
    assert spec["multicast"] == {"strategy": "auto", "blocks": 16, "k": 1, "fromPeers": True}
    assert spec["hostCopies"] == 1
    assert spec["liveScaling"] == {"enabled": True, "cooperative": True, "minLeadSeconds": 1.0}
    assert spec["materialization"] == {"enabled": False}  # opt in: the Job takes a GPU
    assert spec["engine"] == {
        "device": "auto",
        "dtype": "auto",
        "maxModelLen": 4096,
        "maxBatchSize": 64,
        "maxPrefillTokensPerStep": 512,
        "adaptiveBatch": True,
    }
    assert spec["instance"]["gpus"] == 1
    assert spec["slo"]["interactive"] == {"ttftMs": 1000, "itlMs": 100}
    assert spec["slo"]["batch"] == {"ttftMs": 60_000, "itlMs": 1000}
    for direction in ("scaleUp", "scaleDown"):
        rules = spec["scaling"]["behavior"][direction]
        assert "stabilizationWindowSeconds" not in rules
        assert rules["selectPolicy"] == "Max"
    assert schema_errors(spec, MD_SPEC) == []


def test_minimal_manifest_defaults_match_the_model() -> None:
    by_server = apply_defaults(copy.deepcopy(MINIMAL), MD_SPEC)
    by_model = ModelDeploymentSpec.model_validate(MINIMAL).to_api()
    assert drop_empty(by_server) == drop_empty(by_model)


PARTIAL = [
    {"scaling": {"maxReplicas": 4}},
    {"scaling": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}},
    {"multicast": {"strategy": "chain"}},
    {"instance": {"tolerations": [{"key": "nvidia.com/gpu"}]}},
    {"instance": {"resources": {"requests": {"cpu": "500m", "memory": 1024}}}},
    {"liveScaling": {}, "materialization": {"enabled": False}, "replicas": 0},
    {"model": {"uri": "pvc://models/x", "servedName": "x"}, "slo": {"batch": {}}},
]


@pytest.mark.parametrize("extra", PARTIAL, ids=range(len(PARTIAL)))
def test_partial_manifest_defaults_match_the_model(extra: dict[str, Any]) -> None:
    raw = {**copy.deepcopy(MINIMAL), **copy.deepcopy(extra)}
    by_server = apply_defaults(copy.deepcopy(raw), MD_SPEC)
    assert drop_empty(by_server) == drop_empty(ModelDeploymentSpec.model_validate(raw).to_api())


@pytest.mark.parametrize(
    ("model", "schema", "raw"),
    [
        (ModelDeploymentStatus, MD_STATUS, {}),
        (ScalePlanStatus, SP_STATUS, {}),
        (ScalePlanSpec, SP_SPEC, {"deployment": "d", "modelDigest": "x", "strategy": "chain"}),
        (ScalePlanStatus, SP_STATUS, {"targets": [{"pod": "w-1"}], "conditions": []}),
    ],
    ids=["md-status", "sp-status", "sp-spec", "sp-status-targets"],
)
def test_other_defaults_match_the_models(model: Any, schema: Schema, raw: dict[str, Any]) -> None:
    by_server = apply_defaults(copy.deepcopy(raw), schema)
    assert drop_empty(by_server) == drop_empty(model.model_validate(raw).to_api())


@pytest.mark.parametrize("schema", [MD_SPEC, MD_STATUS, SP_SPEC, SP_STATUS])
def test_every_default_is_valid_for_its_node(schema: Schema) -> None:
    """The API server refuses a CRD whose defaults do not validate (after defaulting)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if "default" in node:
            value = apply_defaults(copy.deepcopy(node["default"]), node)
            assert schema_errors(value, node) == [], node
        stack += node.get("properties", {}).values()
        stack += [n for n in (node.get("items"), node.get("additionalProperties")) if n]


def _example_specs(pattern: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(EXAMPLES.glob(pattern)):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "ModelDeployment":
                out.append((f"{path.parent.name}/{path.name}", doc["spec"]))
    return out


VALID = [e for e in _example_specs("*/*.yaml") if not e[0].startswith("05-invalid")]


@pytest.mark.parametrize(("name", "spec"), VALID, ids=[n for n, _ in VALID])
def test_examples_pass_the_schema_and_default_like_the_model(
    name: str, spec: dict[str, Any]
) -> None:
    by_server = apply_defaults(copy.deepcopy(spec), MD_SPEC)
    assert schema_errors(by_server, MD_SPEC) == []
    assert drop_empty(by_server) == drop_empty(ModelDeploymentSpec.model_validate(spec).to_api())


def test_invalid_examples_fail_where_their_readme_says() -> None:
    """Type and range mistakes fail the 1.20 schema; min > max needs CEL or the operator."""
    specs = dict(_example_specs("05-invalid/*.yaml"))
    assert set(specs) == {
        "05-invalid/wrong-type.yaml",
        "05-invalid/out-of-range.yaml",
        "05-invalid/min-greater-than-max.yaml",
        "05-invalid/escaping-path.yaml",
    }
    errors = {n: schema_errors(apply_defaults(s, MD_SPEC), MD_SPEC) for n, s in specs.items()}
    assert errors["05-invalid/wrong-type.yaml"] == ["spec.replicas: must be of type integer"]
    assert errors["05-invalid/out-of-range.yaml"] == ["spec.replicas: out of range"]
    assert errors["05-invalid/min-greater-than-max.yaml"] == []
    [escaping] = errors["05-invalid/escaping-path.yaml"]
    assert escaping.startswith("spec.model.uri: must match ")


def test_a_pending_plan_status_with_empty_strings_passes_the_schema() -> None:
    """A Pending plan's status (progress "") cancelled after an operator restart was
    rejected by the 1.20 API server on every reconcile; to_api leaves "" out."""
    status = ScalePlanStatus(progress="", targets=[{"pod": "w-1"}]).to_api()  # type: ignore[list-item]
    assert "progress" not in status
    assert schema_errors(status, SP_STATUS, "status") == []
