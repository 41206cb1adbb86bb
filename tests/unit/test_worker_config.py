"""Worker configuration: flags over env, defaults, and rejected values."""

from __future__ import annotations

import pytest

from cascade_worker.config import DEFAULT_DRAIN_SECONDS, WorkerConfig, bind_host, load_config


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


def test_bind_host_prefers_pod_ip() -> None:
    assert bind_host({"POD_IP": "198.18.0.9"}) == "198.18.0.9"
    assert bind_host({"POD_IP": ""}) == "0.0.0.0"
    assert bind_host({}) == "0.0.0.0"
