"""Where the engine computes: the decision (pure, engine/device.py), the operator
passing the ask and the GPU count to every worker-process pod, and a worker that cannot
have the device it was given failing its start with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from operator_fixtures import REF, md

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import builders
from cascade_operator.config import OperatorConfig
from cascade_operator.host_copies import host_copy_pod
from cascade_operator.materialization import profile_job
from cascade_worker import main as worker_main
from cascade_worker.config import load_config
from cascade_worker.engine.device import DeviceUnavailable, Found, choose_device

CFG = OperatorConfig(worker_image="w:1", gateway_image="g:1")
NO_CUDA = Found(cuda_devices=0, torch_cuda=None, visible=None)
TWO_GPUS = Found(cuda_devices=2, torch_cuda="12.8", visible="0,1")


def _never() -> Found:
    raise AssertionError("a CPU pod must not look for CUDA")


def choose(asked: str, gpus: int, found: Found, emulated: bool = False) -> str:
    return choose_device(asked, gpus, lambda: found, emulated=emulated, pod="llama-0")


def test_auto_is_cuda_where_the_pod_was_given_gpus_and_cuda_is_there() -> None:
    assert choose_device("auto", 0, _never, emulated=False, pod="p") == "cpu"
    assert choose_device("", 0, _never, emulated=False, pod="p") == "cpu"  # unset = auto
    assert choose_device("cpu", 4, _never, emulated=False, pod="p") == "cpu"
    assert choose("auto", 1, TWO_GPUS) == "cuda:0"
    assert choose("cuda", 0, TWO_GPUS) == "cuda:0"
    assert choose("cuda:1", 1, TWO_GPUS) == "cuda:1"


def test_a_pod_that_asked_for_gpus_and_finds_none_fails_naming_what_it_found() -> None:
    with pytest.raises(DeviceUnavailable) as caught:
        choose("auto", 1, NO_CUDA)
    message = str(caught.value)
    assert "pod llama-0" in message and "'auto' with 1 GPU(s)" in message
    assert "a CPU-only build, 0 CUDA device(s), CUDA_VISIBLE_DEVICES unset" in message
    with pytest.raises(DeviceUnavailable, match="'cuda' with 0 GPU"):
        choose("cuda", 0, NO_CUDA)
    with pytest.raises(DeviceUnavailable, match="sees 2 CUDA device"):
        choose("cuda:2", 1, TWO_GPUS)


def test_an_emulating_node_computes_on_the_cpu_for_its_gpus() -> None:
    assert choose_device("auto", 8, _never, emulated=True, pod="p") == "cpu"  # no torch
    assert choose("cuda", 1, NO_CUDA, emulated=True) == "cpu"
    assert choose("cuda", 1, TWO_GPUS, emulated=True) == "cuda:0"  # asked for by name
    with pytest.raises(ValueError, match=r"engine\.device: 'tpu'"):
        choose("tpu", 1, NO_CUDA, emulated=True)


def test_every_worker_process_pod_gets_the_ask_and_instances_their_gpus() -> None:
    spec = ModelDeploymentSpec.model_validate(
        {"model": {"uri": "file:///m/tiny"}, "engine": {"device": "cuda"}, "instance": {"gpus": 2}}
    )

    def env(pod: dict[str, object]) -> dict[str, str]:
        container = pod["spec"]["containers"][0]  # type: ignore[index]
        return {e["name"]: e.get("value") for e in container["env"]}  # type: ignore[index,attr-defined]

    worker = env(builders.worker_pod(REF, spec, 0, CFG))
    assert (worker["CASCADE_DEVICE"], worker["CASCADE_GPUS"]) == ("cuda", "2")
    job = profile_job(REF, spec, CFG)
    profile = env(job["spec"]["template"])
    assert (profile["CASCADE_DEVICE"], profile["CASCADE_GPUS"]) == ("cuda", "2")
    host = env(host_copy_pod(REF, md(), 0, CFG))
    assert host["CASCADE_DEVICE"] == "auto" and "CASCADE_GPUS" not in host  # no GPUs there
    assert (
        ModelDeploymentSpec.model_validate({"model": {"uri": "file:///m"}}).engine.device == "auto"
    )


def test_a_worker_given_a_gpu_it_cannot_find_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"POD_NAME": "llama-0", "CASCADE_GPUS": "1", "CASCADE_DEVICE": "auto"}
    config = load_config([], env)
    assert (config.gpus, config.node_emulation) == (1, False)
    monkeypatch.setattr("cascade_worker.engine.device.probe", lambda: NO_CUDA)
    with pytest.raises(DeviceUnavailable, match="pod llama-0"):
        worker_main.settle_device(config)
    log = tmp_path / "termination-log"
    monkeypatch.setattr(worker_main, "TERMINATION_LOG", str(log))
    assert worker_main.refuse_start("pod llama-0: no CUDA") == 3
    assert log.read_text() == "pod llama-0: no CUDA"
    emulated = load_config([], {**env, "CASCADE_NODE_EMULATION": "1"})
    assert worker_main.settle_device(emulated).device == "cpu"
    assert worker_main.engine_device(worker_main.settle_device(emulated)).emulated  # type: ignore[union-attr]
    asked_cpu = load_config([], {**env, "CASCADE_DEVICE": "cpu"})  # a real node, cpu by choice
    assert not worker_main.engine_device(worker_main.settle_device(asked_cpu)).emulated  # type: ignore[union-attr]
