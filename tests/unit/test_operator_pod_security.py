"""Every pod the operator builds passes the `restricted` Pod Security Standard.

Instances, host copies, the gateway's pod template and the profile Job's, checked with
tests/security_rules.py (the published baseline + restricted controls). The one
documented exception: an instance that uses RDMA adds IPC_LOCK (UCX pins its buffers),
and only then; on TCP it adds nothing. The RDMA resource comes from the operator's
config (chart values), never a hard-coded name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes_validate.utils import all_versions, major_minor
from operator_fixtures import REF, md
from security_rules import added_capabilities, pod_of, violations

from cascade_api import constants as c
from cascade_operator import builders, hardening
from cascade_operator.config import OperatorConfig
from cascade_operator.host_copies import host_copy_pod
from cascade_operator.materialization import profile_job

Manifest = dict[str, Any]

RDMA = OperatorConfig(rdma_resource="rdma/rdma_shared_device_a", rdma_count=2)
TCP = OperatorConfig()
WORKER_SRC = Path(__file__).resolve().parents[2] / "worker" / "cascade_worker"


def rendered(cfg: OperatorConfig, **spec: Any) -> dict[str, Manifest]:
    s = md(**spec)
    return {
        "instance": builders.worker_pod(REF, s, 0, cfg),
        "host copy": host_copy_pod(REF, s, 0, cfg),
        "gateway": builders.gateway_deployment(REF, s, cfg),
        "profile job": profile_job(REF, s, cfg),
    }


SHAPES = [
    pytest.param({}, id="file-model"),
    pytest.param({"model": {"uri": "pvc://weights/llama"}}, id="pvc-model"),
    pytest.param({"instance": {"gpus": 0}}, id="cpu"),
    pytest.param({"instance": {"gpus": 4}}, id="gpus"),
]


@pytest.mark.parametrize("spec", SHAPES)
@pytest.mark.parametrize("cfg", [TCP, RDMA], ids=["tcp", "rdma"])
def test_operator_pods_pass_restricted(cfg: OperatorConfig, spec: dict[str, Any]) -> None:
    for what, obj in rendered(cfg, **spec).items():
        rdma_instance = what == "instance" and hardening.uses_rdma(md(**spec).instance.gpus, cfg)
        assert violations(obj, allow_add={"IPC_LOCK"} if rdma_instance else ()) == [], what
        assert added_capabilities(obj) == (["IPC_LOCK"] if rdma_instance else []), what


def test_a_tcp_worker_adds_no_capability_and_requests_no_rdma() -> None:
    pod = builders.worker_pod(REF, md(instance={"gpus": 2}), 0, TCP)
    assert violations(pod) == [] and added_capabilities(pod) == []
    resources = pod["spec"]["containers"][0]["resources"]
    assert set(resources["limits"]) == {c.GPU_RESOURCE}


def test_an_rdma_worker_adds_only_ipc_lock_and_requests_the_configured_resource() -> None:
    pod = builders.worker_pod(REF, md(instance={"gpus": 2}), 0, RDMA)
    assert added_capabilities(pod) == ["IPC_LOCK"]
    # IPC_LOCK is the only thing `restricted` refuses in it.
    assert violations(pod) == ["capabilities: container worker adds ['IPC_LOCK']"]
    resources = pod["spec"]["containers"][0]["resources"]
    for side in ("requests", "limits"):
        assert resources[side]["rdma/rdma_shared_device_a"] == "2"
    # A CPU instance has no GPU to feed: no RDMA device, no capability.
    cpu = builders.worker_pod(REF, md(instance={"gpus": 0}), 0, RDMA)
    assert added_capabilities(cpu) == []
    assert cpu["spec"]["containers"][0]["resources"] == {}


def test_rdma_config_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not OperatorConfig.from_env().rdma  # default: no RDMA plugin, TCP
    monkeypatch.setenv("CASCADE_RDMA_RESOURCE", "nvidia.com/hostdev")
    monkeypatch.setenv("CASCADE_RDMA_COUNT", "4")
    cfg = OperatorConfig.from_env()
    assert (cfg.rdma, cfg.rdma_resource, cfg.rdma_count) == (True, "nvidia.com/hostdev", 4)
    monkeypatch.setenv("CASCADE_RDMA_COUNT", "0")
    assert not OperatorConfig.from_env().rdma


@pytest.mark.parametrize("what", ["instance", "host copy", "profile job", "gateway"])
def test_root_is_read_only_and_the_process_writes_to_its_scratch_dir(what: str) -> None:
    pod = pod_of(rendered(TCP, model={"uri": "pvc://weights/llama"})[what])
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts[hardening.SCRATCH_PATH]]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TMPDIR"] == env["HOME"] == hardening.SCRATCH_PATH
    assert spec["securityContext"]["runAsUser"] == hardening.RUN_AS != 0


def test_only_the_gateway_gets_a_service_account_token() -> None:
    pods = {what: pod_of(obj)["spec"] for what, obj in rendered(TCP).items()}
    assert {what: spec["automountServiceAccountToken"] for what, spec in pods.items()} == {
        "instance": False,
        "host copy": False,
        "profile job": False,
        "gateway": True,  # it lists its worker pods
    }


def test_the_worker_never_calls_the_api_server() -> None:
    """Why workers may go without a token: nothing in the worker imports a kube client."""
    pattern = re.compile(r"^\s*(from|import)\s+(kubernetes|kopf)\b", re.MULTILINE)
    users = [p for p in WORKER_SRC.rglob("*.py") if pattern.search(p.read_text())]
    assert users == []


def _k8s_version() -> str:
    floor = major_minor("1.20.0")
    return str(min((v for v in all_versions() if major_minor(v) >= floor), key=major_minor))


@pytest.mark.parametrize("cfg", [TCP, RDMA], ids=["tcp", "rdma"])
def test_hardened_objects_are_valid_kubernetes(cfg: OperatorConfig) -> None:
    for what, obj in rendered(cfg, model={"uri": "pvc://weights/llama"}).items():
        try:
            kubernetes_validate.validate(obj, _k8s_version(), strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{what}: {str(err).splitlines()[0]}")
