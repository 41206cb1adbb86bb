"""Gateway configuration: flags over env and defaults."""

from __future__ import annotations

import pytest

from cascade_gateway.config import GatewayConfig, load_config, parse_backends
from cascade_protocol.cli_args import DEFAULT_DRAIN_SECONDS
from cascade_protocol.generate import RequestClass
from cascade_protocol.queue_order import QueueOrder


def test_defaults() -> None:
    assert load_config([], {}) == GatewayConfig(
        host="0.0.0.0",
        port=8000,
        model_name="",
        deployment="",
        drain_seconds=DEFAULT_DRAIN_SECONDS,
    )
    config = load_config([], {})
    assert (config.discovery, config.backends, config.namespace) == ("static", (), "default")
    assert (config.interactive_queue, config.batch_queue) == (256, 4096)
    assert (config.request_timeout, config.max_attempts, config.backend_slack) == (300.0, 3, 2)


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


def test_backends_queues_and_discovery() -> None:
    env = {
        "CASCADE_BACKENDS": "http://10.0.0.1:8080/, 10.0.0.2:8080,,",
        "CASCADE_DISCOVERY": "kubernetes",
        "CASCADE_DEPLOYMENT": "tiny",
        "POD_NAMESPACE": "serving",
        "CASCADE_BATCH_QUEUE": "7",
        "CASCADE_REQUEST_TIMEOUT": "30",
    }
    config = load_config(
        ["--backend", "http://10.0.0.3:8080", "--backend", "10.0.0.1:8080",
         "--interactive-queue", "0", "--max-attempts", "5", "--backend-slack", "1",
         "--poll-seconds", "0.5", "--discovery-seconds", "4"],
        env,
    )  # fmt: skip
    assert config.backends == (
        "http://10.0.0.1:8080",
        "http://10.0.0.2:8080",
        "http://10.0.0.3:8080",
    )
    assert (config.discovery, config.namespace, config.deployment) == (
        "kubernetes", "serving", "tiny"
    )  # fmt: skip
    assert (config.interactive_queue, config.batch_queue) == (0, 7)
    assert (config.request_timeout, config.max_attempts, config.backend_slack) == (30.0, 5, 1)
    assert (config.poll_seconds, config.discovery_seconds) == (0.5, 4.0)


def test_parse_backends() -> None:
    assert parse_backends("") == []
    assert parse_backends("a:1,https://b/") == ["http://a:1", "https://b"]


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        ([], {"CASCADE_GATEWAY_PORT": "eighty"}),
        (["--max-attempts", "0"], {}),
        (["--request-timeout", "0"], {}),
        (["--interactive-queue", "-1"], {}),
        (["--discovery", "consul"], {}),
        (["--discovery", "kubernetes"], {}),  # needs CASCADE_DEPLOYMENT
    ],
)
def test_bad_values_are_usage_errors(argv: list[str], env: dict[str, str]) -> None:
    with pytest.raises(SystemExit) as exc:
        load_config(argv, env)
    assert exc.value.code == 2


def test_slos_and_keepalive() -> None:
    config = load_config([], {})
    assert (config.interactive_ttft_slo_ms, config.batch_ttft_slo_ms) == (1000, 60000)
    assert config.keepalive_seconds == 5.0
    assert (config.ttft_slo_s(RequestClass.INTERACTIVE), config.ttft_slo_s(RequestClass.BATCH)) == (
        1.0, 60.0
    )  # fmt: skip
    env = {"CASCADE_INTERACTIVE_TTFT_SLO_MS": "250", "CASCADE_BATCH_TTFT_SLO_MS": "600000",
           "CASCADE_KEEPALIVE_SECONDS": "2.5"}  # fmt: skip
    config = load_config([], env)
    assert (config.interactive_ttft_slo_ms, config.batch_ttft_slo_ms) == (250, 600000)
    assert config.keepalive_seconds == 2.5
    config = load_config(["--batch-ttft-slo-ms", "30000", "--keepalive-seconds", "1"], env)
    assert (config.batch_ttft_slo_ms, config.keepalive_seconds) == (30000, 1.0)
    for argv in (["--interactive-ttft-slo-ms", "0"], ["--keepalive-seconds", "0"]):
        with pytest.raises(SystemExit):
            load_config(argv, {})


def test_queue_order() -> None:
    assert load_config([], {}).queue_order == QueueOrder.ON_TIME_FIRST
    assert load_config([], {"CASCADE_QUEUE_ORDER": "FIFO"}).queue_order == QueueOrder.FIFO
    with pytest.raises(SystemExit):
        load_config(["--queue-order", "LIFO"], {})
