"""Issue 3, acceptance 4: a worker pod told to fetch the model from another pod ends equal.

On the real local cluster: a tiny checkpoint made by `cascade model init`, the operator
running a two-replica ModelDeployment with its file:// URI, then over the workers'
control API (pod IPs are reachable from the host) `load` on pod 0 and `fetch` on pod 1
from pod 0's IP; pod 1 must reach phase ready with pod 0's digest and block checksums.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cascade_api.constants import WORKER_PORT
from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MD = "fetcher"


def http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


class Cluster:
    def __init__(self, dev: DevCluster, namespace: str) -> None:
        self.dev = dev
        self.ns = namespace

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return self.dev.kubectl("-n", self.ns, *args, stdin=stdin).stdout

    def worker_pods(self) -> list[dict[str, Any]]:
        out = self.kubectl(
            "get",
            "pods",
            "-l",
            f"cascade.dev/deployment={MD},app.kubernetes.io/component=worker",
            "-o",
            "json",
        )
        pods = json.loads(out)["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return sorted(live, key=lambda p: p["metadata"]["name"])

    def ready_pods(self) -> list[dict[str, Any]]:
        return [
            p
            for p in self.worker_pods()
            if p["status"].get("podIP")
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions", [])
            )
        ]


@pytest.fixture
def cluster(dev_cluster: DevCluster, tmp_path: Path) -> Iterator[Cluster]:
    ns = f"cascade-fetch-{uuid.uuid4().hex[:6]}"
    c = Cluster(dev_cluster, ns)
    dev_cluster.kubectl("apply", "--validate=false", "-f", str(ROOT / "crds"))
    dev_cluster.kubectl(
        "wait", "--for=condition=Established", "crd/modeldeployments.cascade.dev", "--timeout=60s"
    )
    dev_cluster.kubectl("create", "namespace", ns)
    log = (tmp_path / "operator.log").open("ab")
    operator = subprocess.Popen(
        [str(BIN / "cascade-operator"), "--namespace", ns, "--liveness-port", "0"],
        env={**os.environ, "KUBECONFIG": str(dev_cluster.kubeconfig)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield c
    finally:
        dev_cluster.kubectl("-n", ns, "delete", "md", MD, "--wait=false", check=False)
        dev_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        operator.terminate()
        try:
            operator.wait(timeout=15)
        except subprocess.TimeoutExpired:
            operator.kill()
        log.close()


def test_pod_fetches_model_from_peer_pod(cluster: Cluster, tmp_path: Path) -> None:
    model = tmp_path / "tiny"
    subprocess.run(
        [str(BIN / "cascade"), "model", "init", str(model), "--layers", "4", "--hidden", "64"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    md = {
        "apiVersion": "cascade.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": MD},
        "spec": {"model": {"uri": f"file://{model}"}, "replicas": 2},
    }
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(md))
    wait_for("2 worker pods Ready", lambda: len(cluster.ready_pods()) == 2, timeout=180)
    src, dst = cluster.ready_pods()
    a = f"http://{src['status']['podIP']}:{WORKER_PORT}"
    b = f"http://{dst['status']['podIP']}:{WORKER_PORT}"

    status, doc = http("POST", f"{a}/v1/control/load", {"blocks": 2})
    assert status == 202, doc
    wait_for("pod 0 loaded", lambda: http("GET", f"{a}/v1/status")[1]["phase"] != "loading")
    assert http("GET", f"{a}/v1/status")[1]["phase"] == "ready"

    status, doc = http("POST", f"{b}/v1/control/fetch", {"peer": src["status"]["podIP"]})
    assert status == 202, doc
    wait_for(
        "pod 1 fetched",
        lambda: http("GET", f"{b}/v1/status")[1]["phase"] in ("ready", "failed"),
        timeout=120,
    )
    sa, sb = http("GET", f"{a}/v1/status")[1], http("GET", f"{b}/v1/status")[1]
    assert sb["phase"] == "ready", sb
    assert sb["model_digest"] == sa["model_digest"]
    assert sb["last_transfer"]["missing"] == [] and sb["bytes_received"] > 0
    ma, mb = http("GET", f"{a}/v1/control/manifest")[1], http("GET", f"{b}/v1/control/manifest")[1]
    assert [blk["checksum"] for blk in ma["blocks"]] == [blk["checksum"] for blk in mb["blocks"]]
