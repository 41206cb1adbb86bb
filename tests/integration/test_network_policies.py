"""A deployment's NetworkPolicies on the real local cluster: they exist, come back when
deleted, go with the deployment, its hardened worker serves, and they hold against real
connections.

The dev cluster's node agent enforces NetworkPolicies with nftables in each pod's
network namespace (cascade_dev.netpolicy, nodeagent/policies.py), as a CNI's policy
agent does: a pod of another namespace cannot open a TCP connection to a worker's
control or data port (dropped), while it still reaches the gateway's public port, the
deployment's own gateway serves through the workers, and one instance reaches another.
Pod processes run as their securityContext's user: the worker's process (uid and gid
10001, no capability, no new privileges) is read from /proc.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from integration_helpers import Namespace, complete, container_pid, proc_status, process_tree

from cascade_api.constants import DATA_PORT, GATEWAY_PORT, WORKER_PORT
from cascade_dev.testing import DevCluster, wait_for
from cascade_dev.topology import pod_netns

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MD = "guarded"
POLICIES = [f"{MD}-gateway", f"{MD}-workers"]


def policies(ns: Namespace) -> list[dict[str, Any]]:
    found = json.loads(ns.kubectl("get", "networkpolicies", "-o", "json"))["items"]
    return sorted(found, key=lambda p: p["metadata"]["name"])


def names(ns: Namespace) -> list[str]:
    return [p["metadata"]["name"] for p in policies(ns)]


def test_policies_exist_for_a_deployment_and_its_hardened_worker_serves(
    cluster: Namespace,
) -> None:
    ns = cluster
    ns.apply_model(MD, 1)
    wait_for("the NetworkPolicies", lambda: names(ns) == POLICIES, timeout=60)
    uid = json.loads(ns.kubectl("get", "md", MD, "-o", "json"))["metadata"]["uid"]
    for policy in policies(ns):
        assert [o["uid"] for o in policy["metadata"]["ownerReferences"]] == [uid]

    ns.wait_ready(MD, 1, 240, "the worker Ready")
    (pod,) = ns.ready_pods(MD)
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["automountServiceAccountToken"] is False
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # The process runs as the user its pod declares, with no capability left.
    for pid in process_tree(container_pid(pod)):
        status = proc_status(pid)
        print(pid, {k: status[k] for k in ("Name", "Uid", "Gid", "Groups", "CapEff", "NoNewPrivs")})
        assert status["Uid"].split() == ["10001"] * 4 and status["Gid"].split() == ["10001"] * 4
        assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
        assert status["NoNewPrivs"] == "1"

    ns.kubectl("delete", "networkpolicy", f"{MD}-workers")
    wait_for("the deleted policy back", lambda: names(ns) == POLICIES, timeout=90)

    ns.kubectl("delete", "md", MD, "--wait=false")
    wait_for("the policies collected with it", lambda: names(ns) == [], timeout=120)


# A tenant's pod: tries each TARGETS address once (3 s), prints what happened, then idles.
PROBE = """
import json, os, socket, time
found = {}
for target in os.environ["TARGETS"].split(","):
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, int(port)))
        found[target] = "open"
    except OSError as e:
        found[target] = type(e).__name__
    finally:
        s.close()
print("RESULT " + json.dumps(found), flush=True)
time.sleep(3600)
"""


def probe_pod(name: str, namespace: str, targets: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "containers": [{
                "name": "probe", "image": "python:3", "command": ["python3", "-c", PROBE],
                "env": [{"name": "TARGETS", "value": ",".join(targets)}],
            }],
        },
    }  # fmt: skip


def probe_result(dev: DevCluster, namespace: str, name: str) -> dict[str, str] | None:
    logs = dev.kubectl("logs", "-n", namespace, name, check=False).stdout
    line = next((x for x in logs.splitlines() if x.startswith("RESULT ")), None)
    return json.loads(line.removeprefix("RESULT ")) if line else None


def connects_from(pod: dict[str, Any], ip: str, port: int) -> bool:
    """Whether a TCP connection from inside `pod`'s network namespace opens."""
    code = f"import socket; socket.create_connection(({ip!r}, {port}), timeout=3).close()"
    netns = pod_netns(pod["metadata"]["uid"])
    done = subprocess.run(
        ["ip", "netns", "exec", netns, "python3", "-c", code], capture_output=True, timeout=30
    )  # fmt: skip
    return done.returncode == 0


def test_another_namespace_cannot_reach_the_workers_but_the_deployment_can(
    cluster: Namespace, dev_cluster: DevCluster
) -> None:
    ns = cluster
    ns.serve_model(MD, 2)
    wait_for("the NetworkPolicies", lambda: names(ns) == POLICIES, timeout=60)
    first, second = ns.ready_pods(MD)
    worker_ip = first["status"]["podIP"]
    gateway = ns.gateway_pods(MD)[0]
    gateway_ip = gateway["status"]["podIP"]
    tenant = f"{ns.ns}-b"
    dev_cluster.kubectl("create", "namespace", tenant)
    try:
        targets = [f"{worker_ip}:{WORKER_PORT}", f"{worker_ip}:{DATA_PORT}",
                   f"{gateway_ip}:{GATEWAY_PORT}"]  # fmt: skip
        manifest = json.dumps(probe_pod("intruder", tenant, targets))
        dev_cluster.kubectl("apply", "-f", "-", stdin=manifest)
        wait_for("the probe's result",
                 lambda: probe_result(dev_cluster, tenant, "intruder") is not None,
                 timeout=120)  # fmt: skip
        found = probe_result(dev_cluster, tenant, "intruder")
        print(f"from namespace {tenant}: {found}")
        assert found is not None
        assert found[f"{gateway_ip}:{GATEWAY_PORT}"] == "open"  # the public API, and a live pod
        assert found[f"{worker_ip}:{WORKER_PORT}"] != "open"
        assert found[f"{worker_ip}:{DATA_PORT}"] != "open"
    finally:
        dev_cluster.kubectl("delete", "namespace", tenant, "--wait=false", check=False)
    url = dev_cluster.url(f"{ns.ns}/{MD}-gateway")
    assert complete(url, MD)  # the gateway reaches the workers
    assert connects_from(second, worker_ip, WORKER_PORT)  # a peer reaches its peer
    assert connects_from(second, worker_ip, DATA_PORT)
    assert not connects_from(gateway, worker_ip, DATA_PORT)  # the gateway: HTTP only
