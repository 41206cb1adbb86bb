"""Issue 12, acceptance 2 and 3: host copies keep the model at replicas 0.

On the real local cluster, a checkpoint of the test's own (`cascade model init` into the
test's directory, so the test can take the storage away): a one-replica deployment with
`hostCopies: 2`. Once both host copies hold the model the checkpoint directory is
renamed, so from then on any read of storage fails. Scale 0 and back to 1: the new
instance gets its weights from a host copy along a ScalePlan whose sources are host
copies only, and generates the same greedy tokens. One host copy deleted: it is
re-created on its own and filled from the other (storage is still gone). Then with
`hostCopies: 1` and the checkpoint back, the only host copy deleted at replicas 0 is
re-created from storage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from integration_helpers import Namespace, generated, model_deployment, pod_ready, small_model

from cascade_api.constants import WORKER_PORT
from cascade_dev.testing import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

MD = "pooled"
ASK = {"request_id": "r", "prompt": "Hello host", "params": {"max_tokens": 12, "temperature": 0}}


def copies_ready(ns: Namespace, n: int) -> bool:
    pods = ns.host_copies(MD)
    return len(pods) == n and all(pod_ready(p) for p in pods)


def scale(ns: Namespace, replicas: int) -> None:
    ns.kubectl("scale", "md", MD, f"--replicas={replicas}")


def tokens(ns: Namespace) -> list[int]:
    (pod,) = ns.ready_pods(MD)
    return generated(f"http://{pod['status']['podIP']}:{WORKER_PORT}/v1/generate", ASK)


def plans_for(ns: Namespace, pod: str) -> list[dict[str, Any]]:
    plans = json.loads(ns.kubectl("get", "sp", "-o", "json"))["items"]
    return [p for p in plans if pod in p["spec"]["targets"]]


def test_host_copies_serve_scale_from_zero_and_survive_losses(
    cluster: Namespace, tmp_path: Path
) -> None:
    ns = cluster
    model = small_model()
    manifest = model_deployment(MD, 1, model=model, hostCopies=2, scaling={"minReplicas": 0})
    ns.apply(manifest, "--validate=false")
    ns.wait_ready(MD, 1)
    wait_for("2 host copies Ready", lambda: copies_ready(ns, 2), timeout=240)
    nodes = {p["spec"]["nodeName"] for p in ns.host_copies(MD)}
    assert len(nodes) == 2, "host copies share a node"
    before = tokens(ns)

    # Storage goes away: from here on only peers have the model.
    away = model.with_name("tiny.away")
    model.rename(away)

    scale(ns, 0)
    wait_for("no instance", lambda: ns.worker_pods(MD) == [], timeout=120)
    shown = ns.md_status(MD)["hostCopies"]
    print("status.hostCopies at replicas 0:", shown)
    assert len(shown) == 2 and all(h["ready"] for h in shown)
    assert len({h["bytesHeld"] for h in shown}) == 1 and shown[0]["bytesHeld"] > 0

    scale(ns, 1)
    ns.wait_ready(MD, 1, 240, "1 instance Ready from a host copy")
    (pod,) = ns.ready_pods(MD)
    name = pod["metadata"]["name"]
    assert pod["metadata"]["annotations"]["cascade.dev/start"] == "await"
    (plan,) = plans_for(ns, name)
    print("plan to", name, "sources", plan["spec"]["sources"])
    assert {s["tier"] for s in plan["spec"]["sources"]} == {"host"}
    assert tokens(ns) == before

    # One host copy lost: re-created and filled from the other (storage is gone).
    kept = {p["metadata"]["name"] for p in ns.host_copies(MD)}
    lost = sorted(kept)[0]
    ns.kubectl("delete", "pod", lost, "--wait=false")
    wait_for("the lost host copy re-created", lambda: copies_ready(ns, 2), timeout=240)
    (new,) = {p["metadata"]["name"] for p in ns.host_copies(MD)} - kept
    refill = [p for p in plans_for(ns, new) if p["status"].get("phase") == "Completed"]
    assert refill, f"{new} was not filled by a plan"
    print(f"{lost} lost; {new} filled from", refill[0]["spec"]["sources"])
    assert tokens(ns) == before

    # The only host copy at replicas 0, with storage back: re-created from storage.
    away.rename(model)
    scale(ns, 0)
    ns.kubectl("patch", "md", MD, "--type=merge", "-p", '{"spec":{"hostCopies":1}}')
    wait_for("one host copy left", lambda: copies_ready(ns, 1), timeout=120)
    (only,) = ns.host_copies(MD)
    ns.kubectl("delete", "pod", only["metadata"]["name"], "--wait=false")
    wait_for("the only host copy re-created", lambda: copies_ready(ns, 1), timeout=240)
    scale(ns, 1)
    ns.wait_ready(MD, 1, 240, "1 instance Ready again")
    assert tokens(ns) == before
