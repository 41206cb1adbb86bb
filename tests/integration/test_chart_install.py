"""`helm install` onto the local cluster: the operator runs as a pod (through the node
agent, in its own network namespace, with its ServiceAccount token and least-privilege
RBAC) and reconciles a sample ModelDeployment to Available; the gateway answers through
`cascade dev url`."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.helm]

ROOT = Path(__file__).resolve().parents[2]
RELEASE, NAMESPACE, APP_NS = "cascade", "cascade-system", "chart-it"


@pytest.fixture(scope="module")
def release(dev_cluster: DevCluster) -> Iterator[str]:
    out = subprocess.run(
        ["bash", str(ROOT / "hack/install-helm.sh")], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        pytest.skip(f"helm unavailable: {out.stderr.strip()[-300:]}")
    helm = out.stdout.strip().splitlines()[-1]

    def run(*args: str) -> None:
        out = subprocess.run(
            [helm, *args], env=dev_cluster.env, capture_output=True, text=True, timeout=400
        )
        assert out.returncode == 0, f"helm {' '.join(args)} failed: {out.stderr}"

    run(
        "upgrade",
        "--install",
        RELEASE,
        str(ROOT / "charts/cascade"),
        "-n",
        NAMESPACE,
        "--create-namespace",
        "--wait",
        "--timeout",
        "5m",
    )
    yield helm
    dev_cluster.kubectl("delete", "namespace", APP_NS, "--wait=false", check=False)
    run("uninstall", RELEASE, "-n", NAMESPACE)  # helm 3.6: no --wait for uninstall
    wait_for(
        "the operator pod to go",
        lambda: not get(dev_cluster, "pods", "-n", NAMESPACE)["items"],
        timeout=60,
    )


def get(cluster: DevCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def test_chart_operator_pod_serves_a_model_deployment(
    dev_cluster: DevCluster, release: str
) -> None:
    pods = get(dev_cluster, "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=cascade")
    assert [p["status"]["phase"] for p in pods["items"]] == ["Running"]
    operator_pod = pods["items"][0]
    assert operator_pod["spec"]["nodeName"].startswith("cascade-node-")
    assert operator_pod["spec"]["serviceAccountName"] != "default"

    dev_cluster.kubectl("create", "namespace", APP_NS)
    sample = yaml.safe_load((ROOT / "examples/01-minimal/modeldeployment.yaml").read_text())
    sample["metadata"]["namespace"] = APP_NS
    dev_cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(sample))
    name = sample["metadata"]["name"]

    def available() -> bool:
        status = get(dev_cluster, "md", name, "-n", APP_NS).get("status") or {}
        return any(
            c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions", [])
        )

    wait_for("the sample to become Available", available)
    url = dev_cluster.url(f"{APP_NS}/{name}-gateway")
    with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as resp:
        models = json.load(resp)
    assert [m["id"] for m in models["data"]] == [sample["spec"]["model"].get("servedName", name)]
