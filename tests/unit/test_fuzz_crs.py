"""Property tests of the custom resources' specs (cascade_api): any document a user or a
controller could store -- shaped like the spec and bent, or a valid one with fields
redrawn -- validates or fails with a pydantic `ValidationError` whose every error names
its field, never another exception; what validates round-trips as stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_strategies import (
    documents,
    error_names_field,
    field_names,
    fuzz,
    json_values,
    keys_in,
    mutations,
)
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaleplan import ScalePlanSpec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "04-multicast" / "modeldeployment.yaml"
PLAN = {
    "deployment": "llama", "modelDigest": "d1", "strategy": "chain",
    "blocks": [{"index": 0, "layerStart": 0, "layerEnd": 2, "bytes": 64, "checksum": "c0"}],
    "sources": [{"pod": "w-0", "tier": "gpu"}], "targets": ["w-1"],
    "chains": [{"source": "w-0", "hops": ["w-1"]}],
}  # fmt: skip
BASES: dict[type[BaseModel], dict[str, Any]] = {
    ModelDeploymentSpec: yaml.safe_load(EXAMPLE.read_text())["spec"],
    ScalePlanSpec: PLAN,
}


@pytest.mark.parametrize("model", sorted(BASES, key=lambda m: m.__name__), ids=lambda m: m.__name__)
@fuzz(250)
@given(data=st.data())
def test_spec_documents(model: type[BaseModel], data: st.DataObject) -> None:
    model.model_validate(BASES[model])  # the base is valid: mutations start from there
    doc = data.draw(mutations(model, BASES[model]) | documents(model) | json_values)
    try:
        spec = model.model_validate(doc)
    except ValidationError as exc:
        names = field_names(model) | keys_in(doc)
        for error in exc.errors():
            if not error["loc"] and not isinstance(doc, dict):
                continue  # the document itself is not an object: nothing else to name
            where = ".".join(str(p) for p in error["loc"])
            assert error_names_field(f"{where} {error['msg']}", names), error
        return
    stored: Any = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert model.model_validate(stored) == spec
