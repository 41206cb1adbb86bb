"""The pipeline port setting and the pipeline control bodies (pure: no sockets)."""

from __future__ import annotations

import pytest

from cascade_api.constants import DATA_PORT, PIPELINE_PORT
from cascade_protocol.control import LocalRequest, ServeRequest, StageRequest
from cascade_worker.config import load_config
from cascade_worker.control.errors import RequestError, parse_body


def test_pipeline_port_default_env_and_flag() -> None:
    assert PIPELINE_PORT != DATA_PORT
    assert load_config([], {}).pipeline_port == PIPELINE_PORT
    assert load_config([], {"CASCADE_PIPELINE_PORT": "19000"}).pipeline_port == 19000
    env = {"CASCADE_PIPELINE_PORT": "19000"}
    assert load_config(["--pipeline-port", "0"], env).pipeline_port == 0  # any free port


@pytest.mark.parametrize("value", ["-1", "70000", "x"])
def test_bad_pipeline_port_is_a_usage_error(value: str) -> None:
    with pytest.raises(SystemExit):
        load_config(["--pipeline-port", value], {})


def test_pipeline_bodies() -> None:
    req = parse_body(ServeRequest, b'{"layers": [0, 1], "stages": ["10.0.0.2:18516"]}')
    assert req.layers == (0, 1) and req.stages == ["10.0.0.2:18516"]
    assert parse_body(ServeRequest, b"{}").stages == []
    assert parse_body(StageRequest, b'{"layers": [1, 3]}').layers == (1, 3)
    parse_body(LocalRequest, b"")
    for model, raw in [
        (StageRequest, b"{}"),
        (StageRequest, b'{"layers": [1]}'),
        (StageRequest, b'{"layers": ["a", 2]}'),
        (ServeRequest, b'{"stages": "10.0.0.2:18516"}'),
        (LocalRequest, b'{"now": true}'),
    ]:
        with pytest.raises(RequestError) as exc:
            parse_body(model, raw)
        assert exc.value.status == 400
