"""Issue 13, acceptance 4 on the real local cluster: a deployment's NetworkPolicies exist,
come back when deleted, go with the deployment, and its hardened worker serves.

The local cluster has no CNI that enforces NetworkPolicies (and its node agent ignores
securityContext), so this checks that the objects are accepted and kept, and that a
worker built with the restricted security context, a read-only root and its scratch
emptyDir still starts and becomes Ready there. What the rules allow is checked on the
rendered objects (tests/unit/test_operator_network_policies.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration_helpers import Namespace, namespace_with_operator

from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MD = "guarded"
POLICIES = [f"{MD}-gateway", f"{MD}-workers"]


@pytest.fixture
def cluster(dev_cluster: DevCluster, tmp_path: Path) -> Iterator[Namespace]:
    with namespace_with_operator(dev_cluster, "cascade-netpol", tmp_path) as ns:
        yield ns


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

    wait_for("the worker Ready", lambda: len(ns.ready_pods(MD)) == 1, timeout=240)
    (pod,) = ns.ready_pods(MD)
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["automountServiceAccountToken"] is False
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True

    ns.kubectl("delete", "networkpolicy", f"{MD}-workers")
    wait_for("the deleted policy back", lambda: names(ns) == POLICIES, timeout=90)

    ns.kubectl("delete", "md", MD, "--wait=false")
    wait_for("the policies collected with it", lambda: names(ns) == [], timeout=120)
