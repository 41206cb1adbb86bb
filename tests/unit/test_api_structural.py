"""The generated schemas are structural, and they reject what the models reject.

An API server refuses a CRD whose schema is not structural (no `$ref`, every node typed,
no `properties` next to `additionalProperties`, ...), and Kubernetes' OpenAPI v3.0
dialect differs from the JSON Schema pydantic emits. These tests walk every node of both
generated schemas, then check that bounds, enums and patterns made it into the schema
and that pydantic rejects the same bad values with an error naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from cascade_api.crd import model_deployment_crd, scale_plan_crd
from cascade_api.modeldeployment import ModelDeploymentSpec

Schema = dict[str, Any]

ALLOWED_KEYS = {
    "type", "description", "format", "default", "enum", "nullable", "pattern",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
    "required", "properties", "additionalProperties", "items",
    "x-kubernetes-int-or-string", "x-kubernetes-validations",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
}  # fmt: skip
INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
TYPES = {"object", "array", "string", "integer", "number", "boolean"}


def _root(crd: dict[str, Any]) -> Schema:
    schema: Schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


ROOTS = {"ModelDeployment": _root(model_deployment_crd()), "ScalePlan": _root(scale_plan_crd())}


def schema_nodes(node: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    """Every schema node below (and including) `node`, with a readable path."""
    yield path or "<root>", node
    for name, prop in node.get("properties", {}).items():
        yield from schema_nodes(prop, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from schema_nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_nodes(node["additionalProperties"], f"{path}{{*}}")


def _all_keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from _all_keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _all_keys(inner)


NODES = [(f"{kind}{path}", node) for kind, r in ROOTS.items() for path, node in schema_nodes(r)]
NODE_IDS = [path for path, _ in NODES]


@pytest.mark.parametrize("kind", ROOTS)
def test_no_refs_defs_or_titles_anywhere(kind: str) -> None:
    keys = set(_all_keys(ROOTS[kind]))
    assert not keys & {"$ref", "$defs", "definitions", "title", "const", "discriminator"}


@pytest.mark.parametrize(("path", "node"), NODES, ids=NODE_IDS)
def test_node_is_structural(path: str, node: Schema) -> None:
    unknown = set(node) - ALLOWED_KEYS - {"anyOf"}
    assert not unknown, f"{path}: keys Kubernetes does not know: {unknown}"
    assert "oneOf" not in node and "allOf" not in node and "not" not in node, path
    if "anyOf" in node:
        assert node.get("x-kubernetes-int-or-string") is True, path
        assert node["anyOf"] == INT_OR_STRING_ANY_OF, path
    if node.get("x-kubernetes-int-or-string"):
        assert "type" not in node, f"{path}: int-or-string nodes must not set type"
    else:
        assert node.get("type") in TYPES, f"{path}: every node needs a type"
    assert not ("properties" in node and "additionalProperties" in node), path
    if "nullable" in node:
        assert node["nullable"] is True and "type" in node, path
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        assert isinstance(node.get(key, False), bool), f"{path}: OpenAPI v3.0 wants a bool"
    if "required" in node:
        assert set(node["required"]) <= set(node.get("properties", {})), path
    if "enum" in node:
        assert node["type"] == "string" and all(isinstance(v, str) for v in node["enum"]), path
    if "pattern" in node:
        re.compile(node["pattern"])
    if "x-kubernetes-validations" in node:
        assert path == "ModelDeployment.spec", f"{path}: CEL rules only on the spec"


@pytest.mark.parametrize("kind", ROOTS)
def test_no_empty_string_defaults(kind: str) -> None:
    """1.20 reads `default: ''` as null and rejects the whole CRD (seen on the real server)."""
    empty = [path for path, node in schema_nodes(ROOTS[kind]) if node.get("default") == ""]
    assert empty == [], f"{kind}: default '' at {empty}"


@pytest.mark.parametrize("kind", ROOTS)
def test_metadata_is_a_plain_object(kind: str) -> None:
    """The API server validates metadata itself; a CRD may only say it is an object."""
    assert ROOTS[kind]["properties"]["metadata"] == {"type": "object"}
    assert ROOTS[kind]["required"] == ["spec"]


def spec_node(path: str) -> Schema:
    """The ModelDeployment spec schema node at a dotted path ('[]' steps into items)."""
    node: Schema = ROOTS["ModelDeployment"]["properties"]["spec"]
    for part in path.split("."):
        name, items = part.removesuffix("[]"), part.endswith("[]")
        node = node["properties"][name]
        if items:
            node = node["items"]
    return node


def test_bounds_enums_and_patterns_are_in_the_schema() -> None:
    assert spec_node("replicas")["minimum"] == 0
    assert spec_node("replicas")["maximum"] == 10_000
    assert spec_node("multicast.strategy")["enum"] == ["auto", "chain", "binomial"]
    assert spec_node("multicast.k")["minimum"] == 1
    assert spec_node("multicast.blocks")["minimum"] == 1
    assert spec_node("scaling.minReplicas")["minimum"] == 0
    assert spec_node("scaling.maxReplicas")["minimum"] == 1
    assert spec_node("engine.dtype")["enum"] == ["auto", "float16", "bfloat16", "float32"]
    policy_type = spec_node("scaling.behavior.scaleUp.policies[].type")
    assert policy_type["enum"] == ["Pods", "Percent"]
    assert spec_node("instance.tolerations[].operator")["pattern"] == "^(Equal|Exists)$"
    quantity = spec_node("instance.resources.requests")["additionalProperties"]
    assert quantity.get("x-kubernetes-int-or-string") is True


URI_GOOD = [
    "file:///models/x",
    "pvc://claim/path/to",
    "file:///var/lib/cascade/models/tiny-llama",
    "file:///models/x/",
    "pvc://c/.cache/m",
    "file:///m/...",
    "file:///m/..x",
]
URI_BAD = ["http://x", "pvc://claim", "pvc://claim/", "s3://bucket/model", "file://rel/x",
           "pvc://Claim/x", "pvc://-claim/x", "", "pvc://claim/../../etc", "file:///a/../etc",
           "file:///a/./b", "pvc://c/a//b", "file:///..", "pvc://c/x/.."]  # fmt: skip


@pytest.mark.parametrize("uri", URI_GOOD)
def test_uri_pattern_accepts(uri: str) -> None:
    assert re.search(spec_node("model.uri")["pattern"], uri)
    ModelDeploymentSpec.model_validate({"model": {"uri": uri}})


@pytest.mark.parametrize("uri", URI_BAD)
def test_uri_pattern_rejects(uri: str) -> None:
    assert not re.search(spec_node("model.uri")["pattern"], uri)
    with pytest.raises(ValidationError) as err:
        ModelDeploymentSpec.model_validate({"model": {"uri": uri}})
    assert [e["loc"] for e in err.value.errors()] == [("model", "uri")]


def test_a_dot_segment_is_named_in_the_refusal() -> None:
    with pytest.raises(
        ValidationError, match=r"a '\.\.' path segment in 'pvc://claim/\.\./\.\./etc'"
    ):
        ModelDeploymentSpec.model_validate({"model": {"uri": "pvc://claim/../../etc"}})


def schema_rejects(node: Schema, value: Any) -> bool:
    """Whether the API server's schema validation refuses scalar `value` at `node`."""
    kinds: dict[str, Any] = {"integer": int, "string": str, "boolean": bool, "number": (int, float)}
    if isinstance(value, bool) and node["type"] != "boolean":
        return True
    if not isinstance(value, kinds[node["type"]]):
        return True
    if "enum" in node and value not in node["enum"]:
        return True
    if "pattern" in node and not re.search(node["pattern"], value):
        return True
    low, high = node.get("minimum", value), node.get("maximum", value)
    return not low <= value <= high


BAD_VALUES: list[tuple[str, Any]] = [
    ("replicas", -1),
    ("replicas", 10_001),
    ("replicas", "three"),
    ("hostCopies", -1),
    ("multicast.k", 0),
    ("multicast.blocks", 0),
    ("multicast.strategy", "star"),
    ("engine.dtype", "int3"),
    ("engine.maxModelLen", 8),
    ("instance.gpus", 17),
    ("scaling.minReplicas", -1),
    ("scaling.maxReplicas", 0),
    ("scaling.behavior.scaleUp.stabilizationWindowSeconds", 3601),
    ("scaling.behavior.scaleDown.selectPolicy", "Sometimes"),
    ("slo.interactive.ttftMs", 0),
    ("slo.batch.itlMs", 60_001),
    ("liveScaling.enabled", "maybe"),
]


@pytest.mark.parametrize(("path", "value"), BAD_VALUES, ids=[f"{p}={v}" for p, v in BAD_VALUES])
def test_schema_and_models_reject_the_same_values(path: str, value: Any) -> None:
    assert schema_rejects(spec_node(path), value), f"schema lets {path}={value!r} through"
    doc: dict[str, Any] = {"model": {"uri": "file:///models/x"}}
    *parents, leaf = path.split(".")
    cursor = doc
    for part in parents:
        cursor = cursor.setdefault(part, {})
    cursor[leaf] = value
    with pytest.raises(ValidationError) as err:
        ModelDeploymentSpec.model_validate(doc)
    assert [e["loc"] for e in err.value.errors()] == [tuple(path.split("."))]


def test_toleration_operator_rejected_with_item_location() -> None:
    doc = {"model": {"uri": "file:///m"}, "instance": {"tolerations": [{"operator": "Maybe"}]}}
    assert schema_rejects(spec_node("instance.tolerations[].operator"), "Maybe")
    with pytest.raises(ValidationError) as err:
        ModelDeploymentSpec.model_validate(doc)
    assert err.value.errors()[0]["loc"] == ("instance", "tolerations", 0, "operator")


def test_model_uri_is_required() -> None:
    with pytest.raises(ValidationError) as err:
        ModelDeploymentSpec.model_validate({"replicas": 1})
    assert err.value.errors()[0]["loc"] == ("model",)
