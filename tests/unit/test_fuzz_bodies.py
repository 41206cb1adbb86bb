"""Property tests of the bodies a worker parses: control orders (cascade_protocol.control)
and generate requests (the worker's serving API). Any body yields the model or a 400
naming the field -- never a 500 -- and a generate request that parses can be admitted
by the engine's own checks without an exception they do not expect."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_strategies import documents, error_names_field, field_names, fuzz, json_values, keys_in
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from cascade_protocol import control, limits
from cascade_protocol.generate import GenerateRequest
from cascade_worker.control.errors import RequestError, parse_body
from cascade_worker.engine.core import RequestRejected
from cascade_worker.engine.requests import prepare_prompt
from cascade_worker.engine.sampling import SamplerState
from cascade_worker.serving.api import parse_generate

BODIES = sorted(
    (m for m in vars(control).values()
     if isinstance(m, type) and issubclass(m, control.Body) and m is not control.Body),
    key=lambda m: m.__name__,
)  # fmt: skip


def refusal_names_field(message: str, model: type[BaseModel], doc: Any) -> bool:
    return error_names_field(message, field_names(model) | keys_in(doc) | {"body"})


@pytest.mark.parametrize("model", BODIES, ids=lambda m: m.__name__)
@fuzz(120)
@given(data=st.data())
def test_control_bodies(model: type[BaseModel], data: st.DataObject) -> None:
    doc = data.draw(documents(model) | json_values)
    try:
        parsed = parse_body(model, json.dumps(doc).encode())
    except RequestError as exc:
        assert exc.status == 400
        assert refusal_names_field(exc.message, model, doc), exc.message
        return
    assert isinstance(parsed, model)
    if isinstance(parsed, control.ServeRequest):  # what sizes a KV cache is bounded
        assert (parsed.max_batch or 1) <= limits.MAX_BATCH
        assert (parsed.max_model_len or 1) <= limits.MAX_CONTEXT_TOKENS


@fuzz(150)
@given(raw=st.binary(max_size=48))
def test_control_body_bytes(raw: bytes) -> None:
    try:
        parse_body(control.ServeRequest, raw)
    except RequestError as exc:
        assert exc.status == 400 and exc.message


def error_of(response: Any) -> dict[str, Any]:
    assert response.status == 400
    error: dict[str, Any] = json.loads(response.body)["error"]
    return error


@fuzz(700)
@given(doc=documents(GenerateRequest) | json_values)
def test_generate_bodies(doc: Any) -> None:
    parsed = parse_generate(json.dumps(doc).encode())
    if not isinstance(parsed, GenerateRequest):
        error = error_of(parsed)
        named = error["param"] or error["message"]
        assert refusal_names_field(named, GenerateRequest, doc) or not isinstance(doc, dict), error
        return
    params = parsed.params
    assert params.max_tokens <= limits.MAX_CONTEXT_TOKENS
    assert len(params.stop) <= limits.MAX_STOP_STRINGS
    SamplerState.from_params(params)  # a seed torch cannot take would raise here
    try:  # the engine's own admission (no tokenizer: token ids only)
        ids = prepare_prompt(parsed, None, vocab=300, max_model_len=64)
    except RequestRejected as exc:
        assert exc.param in field_names(GenerateRequest) | {"resume.token_ids"}
    else:
        assert 0 < len(ids) < 64


@fuzz(150)
@given(raw=st.binary(max_size=48))
def test_generate_body_bytes(raw: bytes) -> None:
    parsed = parse_generate(raw)
    assert isinstance(parsed, GenerateRequest) or error_of(parsed)["message"]
