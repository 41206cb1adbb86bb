"""Worker configuration: flags over env, defaults, and rejected values."""

from __future__ import annotations

import pytest

from cascade_api.modeldeployment import SloClasses
from cascade_protocol.cli_args import DEFAULT_DRAIN_SECONDS, bind_host
from cascade_worker.config import (
    DEFAULT_QUEUE_LIMIT,
    DEFAULT_REQUEST_DRAIN_SECONDS,
    WorkerConfig,
    load_config,
)


def test_defaults_from_empty_env() -> None:
    config = load_config([], {"POD_NAME": "w-0"})
    assert config == WorkerConfig(
        host="0.0.0.0",
        port=8080,
        model_uri="",
        deployment="",
        pod_name="w-0",
        drain_seconds=DEFAULT_DRAIN_SECONDS,
    )


def test_env_sets_everything() -> None:
    env = {
        "POD_IP": "198.18.0.7",
        "POD_NAME": "llama-w-3",
        "CASCADE_WORKER_PORT": "9090",
        "CASCADE_MODEL_URI": "file:///models/llama",
        "CASCADE_DEPLOYMENT": "llama",
        "CASCADE_DRAIN_SECONDS": "0.5",
    }
    config = load_config([], env)
    assert config.host == "198.18.0.7"
    assert config.port == 9090
    assert config.model_uri == "file:///models/llama"
    assert config.deployment == "llama"
    assert config.pod_name == "llama-w-3"
    assert config.drain_seconds == 0.5


def test_flags_override_env() -> None:
    env = {"CASCADE_WORKER_PORT": "9090", "POD_IP": "198.18.0.7"}
    config = load_config(["--port", "0", "--host", "127.0.0.1", "--drain-seconds", "0"], env)
    assert (config.host, config.port, config.drain_seconds) == ("127.0.0.1", 0, 0.0)


def test_pod_name_falls_back_to_hostname() -> None:
    assert load_config([], {}).pod_name


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--port", "http"], {}),
        (["--port", "70000"], {}),
        ([], {"CASCADE_WORKER_PORT": "-1"}),
        (["--drain-seconds", "-1"], {}),
        ([], {"CASCADE_DRAIN_SECONDS": "soon"}),
    ],
)
def test_bad_values_are_usage_errors(argv: list[str], env: dict[str, str]) -> None:
    with pytest.raises(SystemExit) as exc:
        load_config(argv, env)
    assert exc.value.code == 2


def test_serving_defaults() -> None:
    config = load_config([], {})
    assert config.serve_on_start is False
    assert (config.max_batch, config.max_model_len) == (None, None)
    # The waiting queue is bounded unless asked otherwise (0 = no limit, explicitly).
    assert config.queue_limit == DEFAULT_QUEUE_LIMIT > 0
    assert load_config(["--queue-limit", "0"], {}).queue_limit == 0
    assert (config.device, config.served_name, config.dtype) == ("", "", "auto")
    assert config.request_drain_seconds == DEFAULT_REQUEST_DRAIN_SECONDS


def test_serving_from_env_as_the_operator_sets_it() -> None:
    env = {
        "CASCADE_SERVE": "1",
        "CASCADE_MAX_BATCH_SIZE": "64",
        "CASCADE_MAX_MODEL_LEN": "4096",
        "CASCADE_QUEUE_LIMIT": "8",
        "CASCADE_DEVICE": "cuda:0",
        "CASCADE_DTYPE": "bfloat16",
        "CASCADE_SERVED_NAME": "llama",
        "CASCADE_REQUEST_DRAIN_SECONDS": "5",
        "CASCADE_MODEL_PATH": "/models/llama",
    }
    config = load_config([], env)
    assert config.serve_on_start is True
    assert (config.max_batch, config.max_model_len, config.queue_limit) == (64, 4096, 8)
    assert (config.device, config.served_name, config.dtype) == ("cuda:0", "llama", "bfloat16")
    assert config.request_drain_seconds == 5.0
    assert config.model_path == "/models/llama"
    # CASCADE_MAX_BATCH wins over the operator's CASCADE_MAX_BATCH_SIZE; flags over both.
    assert load_config([], env | {"CASCADE_MAX_BATCH": "16"}).max_batch == 16
    argv = ["--no-serve-on-start", "--max-batch", "2", "--max-model-len", "128"]
    config = load_config([*argv, "--queue-limit", "0"], env)
    assert (config.serve_on_start, config.max_batch, config.max_model_len) == (False, 2, 128)
    assert config.queue_limit == 0
    assert load_config(["--serve-on-start"], {}).serve_on_start is True
    assert load_config([], {"CASCADE_SERVE": "false"}).serve_on_start is False


def test_await_mode_starts_idle_but_wants_to_serve() -> None:
    """A scale-up target: reads no storage at start, unready until streamed weights serve."""
    config = load_config([], {"CASCADE_SERVE": "await"})
    assert (config.serve_on_start, config.await_weights) == (False, True)
    assert load_config([], {"CASCADE_SERVE": "1"}).await_weights is False
    # An explicit flag wins over the environment, as for every other setting.
    flagged = load_config(["--serve-on-start"], {"CASCADE_SERVE": "await"})
    assert (flagged.serve_on_start, flagged.await_weights) == (True, False)


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        ([], {"CASCADE_SERVE": "ture"}),
        ([], {"CASCADE_DTYPE": "fp8"}),
        (["--dtype", "int4"], {}),
        (["--max-batch", "0"], {}),
        ([], {"CASCADE_MAX_BATCH_SIZE": "many"}),
        (["--max-model-len", "-5"], {}),
        ([], {"CASCADE_PREFILL_TOKENS_PER_STEP": "0"}),
        (["--queue-limit", "-1"], {}),
        (["--request-drain-seconds", "-1"], {}),
        (["--adaptive-batch", "maybe"], {}),
        ([], {"CASCADE_ADAPTIVE_BATCH": "auto"}),
        (["--adaptive-batch-tick-seconds", "0"], {}),
        (["--interactive-itl-slo-ms", "0"], {}),
        ([], {"CASCADE_BATCH_ITL_SLO_MS": "1.5"}),
    ],
)
def test_bad_serving_values_are_usage_errors(argv: list[str], env: dict[str, str]) -> None:
    with pytest.raises(SystemExit) as exc:
        load_config(argv, env)
    assert exc.value.code == 2


def test_local_autoscaler_is_off_by_default_with_the_apis_slo_defaults() -> None:
    config = load_config([], {})
    assert config.adaptive_batch is False
    assert config.adaptive_batch_tick_seconds == 0.5
    slo = SloClasses()  # the ModelDeployment's defaults, when the operator passes none
    assert (config.interactive_itl_slo_ms, config.batch_itl_slo_ms) == (
        slo.interactive.itl_ms,
        slo.batch.itl_ms,
    )


def test_local_autoscaler_flags_and_their_env_fallbacks() -> None:
    env = {
        "CASCADE_ADAPTIVE_BATCH": "on",
        "CASCADE_ADAPTIVE_BATCH_TICK_SECONDS": "0.25",
        "CASCADE_INTERACTIVE_ITL_SLO_MS": "40",
        "CASCADE_BATCH_ITL_SLO_MS": "400",
    }
    config = load_config([], env)
    assert config.adaptive_batch is True
    assert config.adaptive_batch_tick_seconds == 0.25
    assert (config.interactive_itl_slo_ms, config.batch_itl_slo_ms) == (40, 400)
    argv = ["--adaptive-batch", "off", "--interactive-itl-slo-ms", "20"]
    flagged = load_config(argv, env)
    assert (flagged.adaptive_batch, flagged.interactive_itl_slo_ms) == (False, 20)
    assert load_config(["--adaptive-batch", "on"], {}).adaptive_batch is True


def test_bind_host_prefers_pod_ip() -> None:
    assert bind_host({"POD_IP": "198.18.0.9"}) == "198.18.0.9"
    assert bind_host({"POD_IP": ""}) == "0.0.0.0"
    assert bind_host({}) == "0.0.0.0"


def test_prefill_budget_from_the_flag_or_the_operators_env() -> None:
    assert load_config([], {}).prefill_tokens_per_step is None  # the engine's default
    env = {"CASCADE_PREFILL_TOKENS_PER_STEP": "128"}
    assert load_config([], env).prefill_tokens_per_step == 128
    assert load_config(["--prefill-tokens-per-step", "64"], env).prefill_tokens_per_step == 64


def test_storage_rate_from_the_flag_or_the_node_agents_env() -> None:
    assert load_config([], {}).storage_mbit is None  # unlimited
    assert load_config([], {"CASCADE_STORAGE_MBIT": "100"}).storage_mbit == 100.0
    assert load_config([], {"CASCADE_STORAGE_MBIT": ""}).storage_mbit is None
    env = {"CASCADE_STORAGE_MBIT": "100"}
    assert load_config(["--storage-mbit", "2.5"], env).storage_mbit == 2.5


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--storage-mbit", "0"], {}),
        (["--storage-mbit", "-3"], {}),
        ([], {"CASCADE_STORAGE_MBIT": "fast"}),
        ([], {"CASCADE_STORAGE_MBIT": "inf"}),
    ],
)
def test_bad_storage_rates_are_usage_errors(
    argv: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        load_config(argv, env)
    assert exc.value.code == 2
    assert "--storage-mbit" in capsys.readouterr().err


def test_materialization_compile_and_the_profile_role_from_env() -> None:
    config = load_config([], {})
    assert not (config.materialization or config.compile or config.materialize_once)
    env = {"CASCADE_MATERIALIZATION": "on", "CASCADE_COMPILE": "on", "CASCADE_ROLE": "materialize"}
    config = load_config([], env)
    assert config.materialization and config.compile and config.materialize_once
    assert not config.host_copy
    with pytest.raises(SystemExit):
        load_config([], {"CASCADE_MATERIALIZATION": "maybe"})
    with pytest.raises(SystemExit):  # a profile run serves nothing
        load_config([], {"CASCADE_ROLE": "materialize", "CASCADE_SERVE": "1"})
