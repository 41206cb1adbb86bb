"""The operator against the real local API server, with real worker processes.

Covers the foundation's acceptance: printer columns and an accurate Available
condition, `kubectl scale` both ways, invalid manifests rejected or marked Degraded,
an operator killed mid-reconcile converging without duplicates, and deletion.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration_helpers import (
    http,
    model_deployment,
    operator_process,
    pod_ready,
    scratch_model_dir,
)

from cascade_dev.operator_process import OperatorProcess
from cascade_dev.testing import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


class Kubectl:
    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.namespace = namespace

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            ["kubectl", "-n", self.namespace, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout + proc.stderr

    def json(self, *args: str) -> Any:
        return yaml.safe_load(self(*args, "-o", "json"))

    def apply(self, doc: dict[str, Any], check: bool = True) -> str:
        return self("apply", "-f", "-", stdin=yaml.safe_dump(doc), check=check)

    def worker_pods(self, md: str) -> list[dict[str, Any]]:
        pods = self.json(
            "get", "pods", "-l", f"cascade.dev/deployment={md},app.kubernetes.io/component=worker"
        )["items"]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


@pytest.fixture(scope="module")
def kubectl(dev_cluster: Any) -> Iterator[Kubectl]:
    ns = f"cascade-it-{uuid.uuid4().hex[:6]}"
    k = Kubectl(Path(dev_cluster.kubeconfig), ns)
    k("apply", "--validate=false", "-f", str(ROOT / "crds"))
    k("wait", "--for=condition=Established", "crd/modeldeployments.cascade.dev", "--timeout=60s")
    k("create", "namespace", ns)
    yield k
    k("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(
    dev_cluster: Any, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    proc = operator_process(dev_cluster, None, tmp_path_factory.mktemp("op") / "operator.log")
    proc.start()
    yield proc
    proc.stop()


def condition(k: Kubectl, md: str, type_: str) -> dict[str, Any]:
    status = k.json("get", "md", md).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


def ready_workers(k: Kubectl, md: str) -> int:
    return sum(pod_ready(p) for p in k.worker_pods(md))


def test_sample_becomes_available_with_printer_columns(
    kubectl: Kubectl, operator: OperatorProcess
) -> None:
    sample = yaml.safe_load((ROOT / "examples/01-minimal/modeldeployment.yaml").read_text())
    sample["metadata"]["name"] = "sample"
    kubectl.apply(sample)
    wait_for(
        "sample Available",
        lambda: condition(kubectl, "sample", "Available").get("status") == "True",
    )
    pods = kubectl.worker_pods("sample")
    assert len(pods) == sample["spec"].get("replicas", 1)
    assert all(p["spec"]["nodeName"].startswith("cascade-node-") for p in pods)
    assert all(p["status"]["phase"] == "Running" for p in pods)
    table = kubectl("get", "md", "sample")
    assert table.split()[:7] == ["NAME", "MODEL", "DESIRED", "READY", "LOADING", "AVAILABLE", "AGE"]
    row = table.splitlines()[1].split()
    assert row[0] == "sample" and row[5] == "True"
    md = kubectl.json("get", "md", "sample")
    assert md["status"]["observedGeneration"] == md["metadata"]["generation"]
    assert (
        condition(kubectl, "sample", "Available")["observedGeneration"]
        == md["metadata"]["generation"]
    )


def test_kubectl_scale_up_and_down(kubectl: Kubectl, operator: OperatorProcess) -> None:
    kubectl.apply(model_deployment("scaler", 1))
    wait_for("1 worker ready", lambda: ready_workers(kubectl, "scaler") == 1)
    kubectl("scale", "md/scaler", "--replicas=3")
    wait_for("3 workers ready", lambda: ready_workers(kubectl, "scaler") == 3)
    assert len(kubectl.worker_pods("scaler")) == 3
    wait_for(
        "status readyReplicas 3",
        lambda: kubectl.json("get", "md", "scaler")["status"].get("readyReplicas") == 3,
    )
    kubectl("scale", "md/scaler", "--replicas=1")
    wait_for(
        "2 workers removed",
        lambda: (
            len(
                kubectl.json(
                    "get",
                    "pods",
                    "-l",
                    "cascade.dev/deployment=scaler,app.kubernetes.io/component=worker",
                )["items"]
            )
            == 1
        ),
        timeout=90,
    )
    assert [p["metadata"]["name"] for p in kubectl.worker_pods("scaler")] == ["scaler-0"]
    path = f"/apis/cascade.dev/v1alpha1/namespaces/{kubectl.namespace}/modeldeployments/scaler"
    scale = yaml.safe_load(kubectl("get", "--raw", f"{path}/scale"))
    assert scale["spec"]["replicas"] == 1
    assert "cascade.dev/deployment=scaler" in scale["status"]["selector"]


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"replicas": "three"}, "spec.replicas"),
        ({"replicas": -1}, "spec.replicas"),
        ({"multicast": {"k": 0}}, "spec.multicast.k"),
    ],
)
def test_schema_rejects_bad_values(kubectl: Kubectl, patch: dict[str, Any], field: str) -> None:
    doc = model_deployment("bad", 1)
    doc["spec"].update(patch)
    out = kubectl.apply(doc, check=False)
    assert "Invalid value" in out or "invalid" in out.lower(), out
    assert field in out, out


def test_a_model_that_cannot_load_is_degraded_and_its_loads_back_off(
    kubectl: Kubectl, operator: OperatorProcess
) -> None:
    """A directory that is no model (an empty one): the worker refuses the load, its
    status counts the failure, the deployment is Degraded naming the pod, the URI and
    the reason within 30 s, and the operator's load orders back off (1, 2, 4 ... s)
    instead of coming once a tick."""
    from cascade_api.constants import WORKER_PORT

    empty = scratch_model_dir("empty")
    kubectl.apply(model_deployment("noload", 1, model=empty))

    def degraded() -> bool:
        return condition(kubectl, "noload", "Degraded").get("reason") == "WorkerJobFailed"

    wait_for("Degraded (WorkerJobFailed)", degraded, timeout=30)
    message = condition(kubectl, "noload", "Degraded")["message"]
    print(message)
    assert "noload-0" in message and "not a model directory" in message
    assert f"file://{empty}" in message
    [pod] = kubectl.worker_pods("noload")
    url = f"http://{pod['status']['podIP']}:{WORKER_PORT}/v1/status"
    first = http("GET", url)[1]
    time.sleep(20)
    later = http("GET", url)[1]
    print(f"failures {first['failures']} -> {later['failures']} in 20 s")
    assert later["phase"] == "failed" and later["failures"] > first["failures"]  # retried
    # Once a reconcile tick (~0.5-2 s) would be 10 or more in 20 s; backing off 1, 2, 4,
    # 8, 16 s it is at most 5 more.
    assert later["failures"] - first["failures"] <= 5, (first["failures"], later["failures"])
    kubectl("delete", "md", "noload", "--wait=false")


def test_a_file_model_outside_the_model_roots_is_refused_naming_them(
    kubectl: Kubectl, operator: OperatorProcess
) -> None:
    """file:///etc passes the URI pattern (no dot segments) but lies below none of the
    operator's model roots: Degraded (InvalidSpec) naming spec.model.uri and the roots,
    and no pod is made that would read the node's /etc."""
    kubectl.apply(model_deployment("etc", 1, model=Path("/etc")))
    wait_for("Degraded", lambda: condition(kubectl, "etc", "Degraded").get("status") == "True")
    degraded = condition(kubectl, "etc", "Degraded")
    print(degraded["message"])
    assert degraded["reason"] == "InvalidSpec"
    assert (
        "spec.model.uri" in degraded["message"] and "/var/lib/cascade/models" in degraded["message"]
    )
    time.sleep(3)  # a few reconciles: still no pod
    assert kubectl.worker_pods("etc") == []
    kubectl("delete", "md", "etc", "--wait=false")


def test_invariant_violation_is_degraded_and_operator_survives(
    kubectl: Kubectl, operator: OperatorProcess
) -> None:
    kubectl.apply(model_deployment("minmax", 1, scaling={"minReplicas": 5, "maxReplicas": 2}))
    wait_for("Degraded", lambda: condition(kubectl, "minmax", "Degraded").get("status") == "True")
    degraded = condition(kubectl, "minmax", "Degraded")
    assert degraded["reason"] == "InvalidSpec"
    assert "spec.scaling.minReplicas" in degraded["message"]
    assert kubectl.worker_pods("minmax") == []
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=minmax")
    assert "InvalidSpec" in events
    assert operator.alive
    # Fixing the spec recovers without recreating the resource.
    kubectl.apply(model_deployment("minmax", 1, scaling={"minReplicas": 1, "maxReplicas": 2}))
    wait_for("recovered", lambda: condition(kubectl, "minmax", "Available").get("status") == "True")
    assert condition(kubectl, "minmax", "Degraded")["status"] == "False"


def test_operator_killed_mid_reconcile_converges_then_delete_cleans_up(
    kubectl: Kubectl, operator: OperatorProcess
) -> None:
    kubectl.apply(model_deployment("crashy", 4))
    wait_for("first pod created", lambda: len(kubectl.worker_pods("crashy")) >= 1, timeout=60)
    operator.kill()
    kubectl("scale", "md/crashy", "--replicas=5")  # a change the dead operator never saw
    operator.start()
    wait_for("5 workers ready", lambda: ready_workers(kubectl, "crashy") == 5, timeout=180)
    names = sorted(p["metadata"]["name"] for p in kubectl.worker_pods("crashy"))
    assert names == [f"crashy-{i}" for i in range(5)]
    gateways = kubectl.json("get", "deployments", "-l", "cascade.dev/deployment=crashy")["items"]
    assert len(gateways) == 1
    kubectl("delete", "md", "crashy", "--wait=false")
    selector = "cascade.dev/deployment=crashy"
    wait_for(
        "everything owned is gone",
        lambda: (
            not kubectl.json("get", "pods,deployments,services", "-l", selector)["items"]
            and "crashy" not in kubectl("get", "md", "-o", "name")
        ),
        timeout=120,
    )
