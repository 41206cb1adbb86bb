"""Deeply nested bodies are refused as bad input on every surface that parses one
(cascade_protocol.json_body): the gateway's OpenAI routes, the worker's generate and
control bodies (a host copy serves the same control API)."""

from __future__ import annotations

import json

import pytest
from fuzz_strategies import deep_json, fuzz
from hypothesis import given

from cascade_protocol import control, json_body
from cascade_worker.control.errors import RequestError, parse_body
from cascade_worker.serving.api import parse_generate

PAST_THE_PARSER = b"[" * 5000 + b"]" * 5000  # json.loads alone raises RecursionError


def test_the_parser_alone_fails_on_this_body() -> None:
    with pytest.raises(RecursionError):
        json.loads(PAST_THE_PARSER)


def test_nesting_past_the_bound_is_refused_whether_or_not_the_parser_copes() -> None:
    assert json_body.load(b"[" * 64 + b"]" * 64) is not None
    for raw in (b"[" * 65 + b"]" * 65, PAST_THE_PARSER):
        with pytest.raises(json_body.TooDeep, match="nested more than 64 levels"):
            json_body.load(raw)
    with pytest.raises(json_body.BodyError, match="not valid JSON"):
        json_body.load(b"{not json")


def test_nesting_counts_arrays_and_objects() -> None:
    assert json_body.nesting(1) == 0
    assert json_body.nesting({"a": [1, {"b": []}]}) == 4
    assert json_body.nesting([[[[]]]], limit=2) == 3  # stops one past the limit


def test_the_worker_answers_400_naming_the_nesting() -> None:
    with pytest.raises(RequestError) as err:
        parse_body(control.ServeRequest, PAST_THE_PARSER)
    assert err.value.status == 400 and "nested" in err.value.message
    answer = parse_generate(PAST_THE_PARSER)
    assert not isinstance(answer, control.Body) and getattr(answer, "status", None) == 400
    assert b"nested more than 64" in answer.body  # type: ignore[union-attr]


@fuzz(60)
@given(raw=deep_json)
def test_any_nesting_parses_or_is_a_400(raw: bytes) -> None:
    try:
        parse_body(control.ServeRequest, raw)
    except RequestError as exc:
        assert exc.status == 400
    answer = parse_generate(raw)
    assert getattr(answer, "status", 400) == 400
