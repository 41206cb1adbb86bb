"""Gateway configuration: flags over env and defaults."""

from __future__ import annotations

import pytest

from cascade_gateway.config import GatewayConfig, load_config
from cascade_worker.config import DEFAULT_DRAIN_SECONDS


def test_defaults() -> None:
    assert load_config([], {}) == GatewayConfig(
        host="0.0.0.0",
        port=8000,
        model_name="",
        deployment="",
        drain_seconds=DEFAULT_DRAIN_SECONDS,
    )


def test_env_and_flags() -> None:
    env = {
        "POD_IP": "198.18.0.5",
        "CASCADE_GATEWAY_PORT": "8001",
        "CASCADE_MODEL_NAME": "tiny-llama",
        "CASCADE_DEPLOYMENT": "tiny",
    }
    config = load_config(["--drain-seconds", "3"], env)
    assert config == GatewayConfig(
        host="198.18.0.5", port=8001, model_name="tiny-llama", deployment="tiny", drain_seconds=3.0
    )
    assert load_config(["--port", "0"], env).port == 0


def test_bad_port_env_is_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        load_config([], {"CASCADE_GATEWAY_PORT": "eighty"})
    assert exc.value.code == 2
