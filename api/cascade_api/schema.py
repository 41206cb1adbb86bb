"""Turn pydantic's JSON Schema into a Kubernetes structural OpenAPI v3 schema.

Structural schemas have no `$ref`, no `title`, every node typed, `nullable` instead of
`anyOf [.., null]`, and `x-kubernetes-int-or-string` for quantities. Objects whose
fields all have defaults get `default: {}` so the API server fills nested defaults
when the user omits the whole object (a minimal manifest is then fully defaulted).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

Schema = dict[str, Any]

_DROP = {"title", "$defs", "discriminator"}


def structural(model: type[BaseModel]) -> Schema:
    """The structural schema of `model` (validation mode, camelCase names)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Schema] = raw.get("$defs", {})
    # A JSON round trip un-shares nodes reused from $defs (no YAML anchors later).
    result: Schema = json.loads(json.dumps(_convert(raw, defs)))
    return result


def _resolve(node: Schema, defs: dict[str, Schema]) -> Schema:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = defs[ref.rsplit("/", 1)[-1]]
    merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return _resolve(merged, defs)


def _convert(node: Schema, defs: dict[str, Schema]) -> Schema:
    node = _resolve(node, defs)
    if "allOf" in node and len(node["allOf"]) == 1:
        inner = _resolve(node["allOf"][0], defs)
        node = {**inner, **{k: v for k, v in node.items() if k != "allOf"}}
    if "anyOf" in node:
        return _convert_any_of(node, defs)
    out: Schema = {k: v for k, v in node.items() if k not in _DROP}
    if out.get("default") == "":
        del out["default"]  # API servers before 1.23 read "" as null and reject the CRD
    if out.get("type") == "object" or "properties" in out:
        out["type"] = "object"
        props = {name: _convert(p, defs) for name, p in node.get("properties", {}).items()}
        if props:
            out["properties"] = props
            out.pop("additionalProperties", None)
            _default_empty_objects(out)
        elif isinstance(node.get("additionalProperties"), dict):
            out["additionalProperties"] = _convert(node["additionalProperties"], defs)
    if out.get("type") == "array" and "items" in node:
        out["items"] = _convert(node["items"], defs)
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    if "const" in out:
        out["enum"] = [out.pop("const")]
        out.setdefault("type", "string")
    return out


def _convert_any_of(node: Schema, defs: dict[str, Schema]) -> Schema:
    options = [_resolve(o, defs) for o in node["anyOf"]]
    non_null = [o for o in options if o.get("type") != "null"]
    rest = {k: v for k, v in node.items() if k not in _DROP | {"anyOf"}}
    if {o.get("type") for o in non_null} == {"integer", "string"}:
        return {**rest, "x-kubernetes-int-or-string": True}
    if len(non_null) != 1:
        raise ValueError(f"cannot express anyOf {node['anyOf']!r} structurally")
    converted = _convert({**non_null[0], **rest}, defs)
    if len(non_null) < len(options):
        converted["nullable"] = True
        if converted.get("default", 0) is None:
            del converted["default"]
    return converted


def _default_empty_objects(obj: Schema) -> None:
    """Give optional object fields `default: {}` when everything inside has a default."""
    required = set(obj.get("required", []))
    for name, prop in obj["properties"].items():
        if name in required or "default" in prop or prop.get("type") != "object":
            continue
        if "properties" in prop and not prop.get("required"):
            prop["default"] = {}
