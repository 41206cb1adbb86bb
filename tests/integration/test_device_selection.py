"""Where the engine computes, on the dev cluster (issue 36 item 1): `spec.engine.device`
reaches the worker pods with their GPU count, and on these emulating nodes a GPU pod
computes on the CPU and says so; a worker given a GPU on a node that is not an emulation
(its own env turns the node agent's flag off) and finding no CUDA fails its start with
the reason."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from integration_helpers import EXAMPLE_MODEL, Namespace, model_deployment

from cascade_api import constants as c
from cascade_dev.testing import wait_for

pytestmark = pytest.mark.integration


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


def test_the_device_reaches_the_pods_and_an_emulated_gpu_computes_on_the_cpu(
    cluster: Namespace,
) -> None:
    md = model_deployment("dev", 1, engine={"device": "cuda"})
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(md))
    cluster.wait_ready("dev", 1)
    [pod] = cluster.worker_pods("dev")
    env = _env(pod)
    assert (env["CASCADE_DEVICE"], env["CASCADE_GPUS"]) == ("cuda", "1")

    def device() -> dict[str, Any] | None:
        status = json.loads(cluster.kubectl("get", "md", "dev", "-o", "json")).get("status", {})
        found = [i.get("device") for i in status.get("instances", [])]
        return found[0] if found and found[0] else None

    wait_for("the instance's device in the status", lambda: device() is not None, timeout=60)
    assert device() | {"memoryBytes": 0} == {  # type: ignore[operator]
        "kind": "cpu", "name": "cpu", "memoryBytes": 0, "emulated": True,
    }  # fmt: skip


def test_a_gpu_pod_without_cuda_on_a_real_node_fails_its_start(cluster: Namespace) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "no-cuda"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "worker",
                "image": c.WORKER_IMAGE,
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "CASCADE_MODEL_PATH", "value": str(EXAMPLE_MODEL)},
                    {"name": "CASCADE_DEVICE", "value": "auto"},
                    {"name": "CASCADE_GPUS", "value": "1"},
                    {"name": c.NODE_EMULATION_ENV, "value": "0"},  # the pod's own env wins
                ],
                "resources": {"limits": {c.GPU_RESOURCE: "1"}, "requests": {c.GPU_RESOURCE: "1"}},
            }],
        },
    }  # fmt: skip
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod))

    def phase() -> str:
        return cluster.kubectl("get", "pod", "no-cuda", "-o", "jsonpath={.status.phase}")

    wait_for("the worker to fail its start", lambda: phase() == "Failed", timeout=120)
    state = json.loads(cluster.kubectl("get", "pod", "no-cuda", "-o", "json"))["status"]
    terminated = state["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3
    log = cluster.kubectl("logs", "no-cuda")
    assert "cannot start: pod no-cuda: engine.device 'auto' with 1 GPU(s) requested" in log
    assert "a CPU-only build, 0 CUDA device(s)" in log
