"""values.schema.json turns bad values into `helm install` errors, and accepts good ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

pytestmark = pytest.mark.helm

Render = Callable[..., list[dict[str, Any]]]
RenderError = Callable[..., str]

CHART = Path(__file__).resolve().parents[2] / "charts" / "cascade"

SCHEMA_ERROR = "values don't meet the specifications of the schema"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("replicaCount=two", "replicaCount: Invalid type"),
        ("replicaCount=2", "replicaCount: Must be less than or equal to 1"),
        ("replicaCount=-1", "replicaCount: Must be greater than or equal to 0"),
        ("image.operator.pullPolicy=Sometimes", "image.operator.pullPolicy must be one of"),
        ("image.operator.repository=", "image.operator.repository"),
        ("image.worker.tag=1", "image.worker.tag: Invalid type"),
        ("image.gateway.registry=x", "Additional property registry is not allowed"),
        ("watchNamespace=team-a", "Additional property watchNamespace is not allowed"),
        ("watchNamespaces=team-a", "watchNamespaces: Invalid type"),
        ("watchNamespaces={Team_A}", "watchNamespaces.0: Does not match pattern"),
        ("watchNamespaces={a,a}", "watchNamespaces: array items"),
        ("rbac.create=yes", "rbac.create: Invalid type"),
        ("serviceAccount.create=1", "serviceAccount.create: Invalid type"),
        ("verbose=loud", "verbose: Invalid type"),
        ("resources.requests.cpu=lots", "resources.requests.cpu"),
        ("resources.request.cpu=1", "Additional property request is not allowed"),
        ("tolerations[0].effect=Sometimes", "tolerations.0.effect must be one of"),
        ("nodeSelector.disk=1", "nodeSelector.disk: Invalid type"),
        ("env[0].value=x", "env.0: name is required"),
        ("podSecurityContext.runAsUser=root", "podSecurityContext.runAsUser: Invalid type"),
        ("rdma.resourceName=rdma ib", "rdma.resourceName: Does not match pattern"),
        ("rdma.count=0", "rdma.count: Must be greater than or equal to 1"),
        ("rdma.devices=1", "Additional property devices is not allowed"),
        ("models.fileRoots={models}", "models.fileRoots.0: Does not match pattern"),
        ("models.fileRoots={/a,b}", "models.fileRoots.1: Does not match pattern"),
    ],
)
def test_bad_value_is_rejected(render_error: RenderError, value: str, message: str) -> None:
    error = render_error(value)
    assert SCHEMA_ERROR in error
    assert message in error


def test_removing_a_required_value_is_rejected(render_error: RenderError) -> None:
    assert "image: operator is required" in render_error("image.operator=null")


@pytest.mark.parametrize(
    "value",
    [
        "replicaCount=0",
        "image.operator.pullPolicy=Always",
        "resources.requests.cpu=0.5",
        "resources.limits.memory=1Gi",
        "serviceAccount.create=false",
        "serviceAccount.name=my-sa",
        "rbac.create=false",
        "rdma.resourceName=rdma/rdma_shared_device_a",
        "rdma.resourceName=nvidia.com/hostdev",
        "rdma.count=4",
    ],
)
def test_good_value_is_accepted(render: Render, value: str) -> None:
    assert render(value)


def test_numeric_looking_tags_pass_with_set_string(render: Render) -> None:
    assert render(extra=["--set-string", "image.operator.tag=1.10"])


def test_schema_is_draft_07_and_closed() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    jsonschema.Draft7Validator.check_schema(schema)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(values)


def test_schema_covers_every_default_value() -> None:
    """Every key in values.yaml is described by the schema (no value escapes checking)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    defs = schema["definitions"]

    def resolve(node: dict[str, object]) -> dict[str, object]:
        ref = node.get("$ref")
        if isinstance(ref, str):
            target: object = schema
            for part in ref.removeprefix("#/").split("/"):
                assert isinstance(target, dict)
                target = target[part]
            assert isinstance(target, dict)
            return resolve(target)
        return node

    def check(value: object, node: dict[str, object], path: str) -> None:
        node = resolve(node)
        assert "type" in node or "oneOf" in node, f"{path}: no type in schema"
        props = node.get("properties")
        if isinstance(value, dict) and isinstance(props, dict):
            for key, child in value.items():
                if key in props:
                    check(child, props[key], f"{path}.{key}")
                else:
                    assert node.get("additionalProperties") not in (None, False), (
                        f"{path}.{key}: not in schema"
                    )

    assert defs
    check(values, schema, "values")
    assert set(values) <= set(schema["properties"])
    assert set(schema["required"]) <= set(values)
