"""Issue 13, "faults survived": the operator killed at random points of scale-ups and
scale-downs converges, with no orphan and no duplicate pod.

On the real local cluster: a deployment scaled 1 -> 4 -> 1 -> 3 -> 2 ..., the operator
SIGKILLed at a random moment after each change (mid-plan, mid-create, mid-status write:
wherever it is) and started again, ten times. Then it must converge: as many instance
pods as replicas, all Ready and serving, distinct instance indices, every pod owned by
the deployment, host copies as many as spec.hostCopies, no ScalePlan left Running.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest
from integration_helpers import Namespace, generated

from cascade_api.constants import WORKER_PORT
from cascade_dev.testing import holds_for, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900), pytest.mark.nodes(4)]

MD = "restarts"
KILLS = 10
SCALES = [4, 1, 3, 1, 4, 2, 1, 3, 1, 2]
ASK = {"request_id": "r", "prompt": "Hello", "params": {"max_tokens": 3, "ignore_eos": True}}


def scale(ns: Namespace, replicas: int) -> None:
    ns.kubectl("scale", "md", MD, f"--replicas={replicas}")


def converged(ns: Namespace, replicas: int) -> bool:
    ready = ns.ready_pods(MD)
    return len(ready) == replicas == len(ns.worker_pods(MD))


def plans(ns: Namespace) -> list[dict[str, Any]]:
    return list(json.loads(ns.kubectl("get", "scaleplans", "-o", "json"))["items"])


def test_a_killed_operator_converges_without_orphans_or_duplicates(cluster: Namespace) -> None:
    ns = cluster
    assert ns.operator is not None
    ns.apply_model(MD, 1)
    wait_for("1 instance Ready", lambda: converged(ns, 1), timeout=240)
    rng = random.Random(13)
    for i, replicas in enumerate(SCALES[:KILLS]):
        scale(ns, replicas)
        time.sleep(rng.uniform(0.2, 6.0))  # a random point: the kill is the test's dice
        ns.operator.kill()
        time.sleep(rng.uniform(0.0, 2.0))  # down a while: the events meanwhile are missed
        ns.operator.start()
        print(f"kill {i + 1}: after scaling to {replicas}")
    final = SCALES[KILLS - 1]
    wait_for(f"{final} instances Ready", lambda: converged(ns, final), timeout=300)
    md = json.loads(ns.kubectl("get", "md", MD, "-o", "json"))
    uid, copies = md["metadata"]["uid"], md["spec"].get("hostCopies", 1)
    pods = ns.worker_pods(MD)
    indices = [p["metadata"]["annotations"]["cascade.dev/instance-index"] for p in pods]
    assert len(set(indices)) == len(indices) == final, indices
    for pod in [*pods, *ns.host_copies(MD)]:
        owners = [o["uid"] for o in pod["metadata"].get("ownerReferences") or []]
        assert owners == [uid], pod["metadata"]["name"]
    wait_for(f"{copies} host copies", lambda: len(ns.host_copies(MD)) == copies, timeout=120)
    wait_for(
        "no ScalePlan running",
        lambda: all((p.get("status") or {}).get("phase") != "Running" for p in plans(ns)),
        timeout=120,
    )
    for pod in ns.ready_pods(MD):
        url = f"http://{pod['status']['podIP']}:{WORKER_PORT}/v1/generate"
        assert len(generated(url, ASK)) == 3
    holds_for(  # and it stays so: nothing created or deleted after convergence
        f"{final} instances and {copies} host copies",
        lambda: converged(ns, final) and len(ns.host_copies(MD)) == copies,
        seconds=5,
    )
