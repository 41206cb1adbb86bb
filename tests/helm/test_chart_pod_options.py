"""Chart values that every pod the operator builds must carry (imagePullSecrets, the
workers' runtimeClassName and annotations, the UCX settings) go from `helm template`
through the operator's environment into each pod it makes: instances, host copies,
profile Jobs and the gateway; a ModelDeployment's spec.instance overrides them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import builders
from cascade_operator.config import OperatorConfig
from cascade_operator.host_copies import host_copy_pod
from cascade_operator.materialization import profile_job
from cascade_operator.observed import MdRef

pytestmark = pytest.mark.helm
Render = Callable[..., list[dict[str, Any]]]
REF = MdRef(namespace="team", name="llama", uid="uid-1")
MULTUS = "k8s.v1.cni.cncf.io/networks"
VALUES = (
    "imagePullSecrets[0].name=regcred",
    "workers.runtimeClassName=nvidia",
    "workers.annotations.k8s\\.v1\\.cni\\.cncf\\.io/networks=data-net",
    "ucx.tls=rc\\,cuda_copy\\,cuda_ipc\\,tcp\\,self",
    "ucx.netDevices=mlx5_0:1",
)


def _operator_config(render: Render, monkeypatch: pytest.MonkeyPatch) -> OperatorConfig:
    [deployment] = [d for d in render(*VALUES) if d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    for e in container["env"]:
        if "value" in e:
            monkeypatch.setenv(e["name"], e["value"])
    return OperatorConfig.from_env()


def _env(pod_spec: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod_spec["containers"][0]["env"]}


def test_every_pod_the_operator_builds_carries_the_charts_values(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _operator_config(render, monkeypatch)
    spec = ModelDeploymentSpec.model_validate({"model": {"uri": "file:///m/tiny"}})
    gateway = builders.gateway_deployment(REF, spec, cfg)["spec"]["template"]
    assert gateway["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    job = profile_job(REF, spec, cfg)["spec"]["template"]
    pods = [builders.worker_pod(REF, spec, 0, cfg), host_copy_pod(REF, spec, 0, cfg), job]
    for pod in pods:
        pod_spec = pod["spec"]
        assert pod_spec["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod_spec["runtimeClassName"] == "nvidia"
        assert pod["metadata"]["annotations"][MULTUS] == "data-net"
        env = _env(pod_spec)
        assert env["UCX_TLS"] == "rc,cuda_copy,cuda_ipc,tcp,self"
        assert env["UCX_NET_DEVICES"] == "mlx5_0:1"


def test_a_deployment_overrides_the_charts_worker_values(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _operator_config(render, monkeypatch)
    instance = {
        "runtimeClassName": "kata-nvidia",
        "annotations": {MULTUS: "ib-net"},
        "env": [{"name": "UCX_TLS", "value": "tcp,self"}, {"name": "NCCL_DEBUG", "value": "INFO"}],
        "shmSize": "2Gi",
    }
    spec = ModelDeploymentSpec.model_validate(
        {"model": {"uri": "file:///m/t"}, "instance": instance}
    )
    pod = builders.worker_pod(REF, spec, 0, cfg)
    assert pod["spec"]["runtimeClassName"] == "kata-nvidia"
    assert pod["metadata"]["annotations"][MULTUS] == "ib-net"
    env = pod["spec"]["containers"][0]["env"]
    last = {e["name"]: e["value"] for e in env if "value" in e}  # a later entry wins
    assert last["UCX_TLS"] == "tcp,self" and last["NCCL_DEBUG"] == "INFO"
    [shm] = [v for v in pod["spec"]["volumes"] if v["name"] == "dshm"]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "2Gi"}
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in mounts


def test_without_values_the_pods_carry_none_of_them() -> None:
    cfg = OperatorConfig(worker_image="w:1", gateway_image="g:1")
    spec = ModelDeploymentSpec.model_validate({"model": {"uri": "file:///m/tiny"}})
    pod = builders.worker_pod(REF, spec, 0, cfg)
    assert "imagePullSecrets" not in pod["spec"] and "runtimeClassName" not in pod["spec"]
    assert not {"UCX_TLS", "UCX_NET_DEVICES"} & set(_env(pod["spec"]))
