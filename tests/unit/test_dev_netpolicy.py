"""The dev fabric's NetworkPolicy rules (cascade_dev.netpolicy): Kubernetes semantics
for which sources reach a pod on which ports, on Cascade's own policies and on the
corners of the API (named ports, namespace selectors, ipBlocks, policies that isolate
without rules), and the nftables script that enforces them."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from typing import Any

import pytest

from cascade_api import constants as c
from cascade_dev.netpolicy import Allow, ingress_allows, ruleset, selects
from cascade_operator.builders import labels
from cascade_operator.config import OperatorConfig
from cascade_operator.network_policies import network_policies
from cascade_operator.observed import MdRef

REF = MdRef(name="llama", namespace="team-a", uid="u1")
CFG = OperatorConfig()


def pod(name: str, ns: str, ip: str, lbl: dict[str, str], ports: Any = ()) -> dict[str, Any]:
    containers = [{"name": "c", "ports": [{"name": n, "containerPort": p} for n, p in ports]}]
    return {
        "metadata": {"name": name, "namespace": ns, "uid": name, "labels": lbl},
        "spec": {"containers": containers},
        "status": {"podIP": ip},
    }


def namespace(name: str, lbl: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": lbl or {}}}


WORKER = pod("llama-0", "team-a", "10.0.0.1", labels("llama", c.COMPONENT_WORKER))
PEER = pod("llama-1", "team-a", "10.0.0.2", labels("llama", c.COMPONENT_WORKER))
GATEWAY = pod("gw", "team-a", "10.0.0.3", labels("llama", c.COMPONENT_GATEWAY))
OPERATOR = pod("op", "cascade-system", "10.0.0.4", dict(CFG.operator_pod_labels))
TENANT_B = pod("intruder", "team-b", "10.0.0.5", {"app": "x"})
PODS = [WORKER, PEER, GATEWAY, OPERATOR, TENANT_B]
NAMESPACES = [namespace("team-a"), namespace("team-b"), namespace("cascade-system")]


def admitted(allows: list[Allow] | None, ip: str, port: int) -> bool:
    """Whether `ip` may reach `port` (TCP), by the allows alone."""
    if allows is None:
        return True
    for a in allows:
        if a.sources is not None and ip not in a.sources:
            continue
        if a.ports is None or any(first <= port <= last for _, first, last in a.ports):
            return True
    return False


def test_cascades_policies_admit_its_gateway_peers_and_operator_only() -> None:
    allows = ingress_allows(WORKER, network_policies(REF, CFG), PODS, NAMESPACES)
    assert admitted(allows, GATEWAY["status"]["podIP"], c.WORKER_PORT)
    assert not admitted(allows, GATEWAY["status"]["podIP"], c.DATA_PORT)
    assert admitted(allows, OPERATOR["status"]["podIP"], c.WORKER_PORT)
    assert admitted(allows, PEER["status"]["podIP"], c.DATA_PORT)
    assert admitted(allows, PEER["status"]["podIP"], 40_123)  # UCX's lane ports
    for port in (c.WORKER_PORT, c.DATA_PORT, c.PIPELINE_PORT):
        assert not admitted(allows, TENANT_B["status"]["podIP"], port)
    gateway = ingress_allows(GATEWAY, network_policies(REF, CFG), PODS, NAMESPACES)
    assert admitted(gateway, TENANT_B["status"]["podIP"], c.GATEWAY_PORT)  # the public API
    assert not admitted(gateway, TENANT_B["status"]["podIP"], c.WORKER_PORT)


def test_a_pod_no_policy_selects_is_not_isolated() -> None:
    assert ingress_allows(TENANT_B, network_policies(REF, CFG), PODS, NAMESPACES) is None
    egress_only = {"metadata": {"name": "e", "namespace": "team-b"},
                   "spec": {"podSelector": {}, "policyTypes": ["Egress"]}}  # fmt: skip
    assert ingress_allows(TENANT_B, [egress_only], PODS, NAMESPACES) is None


def test_a_policy_without_rules_isolates_and_admits_nothing() -> None:
    deny = {"metadata": {"name": "deny", "namespace": "team-b"}, "spec": {"podSelector": {}}}
    assert ingress_allows(TENANT_B, [deny], PODS, NAMESPACES) == []


def test_namespace_selectors_see_the_name_label_and_named_ports_resolve() -> None:
    target = pod("t", "team-b", "10.0.1.1", {"app": "t"}, ports=[("http", 8080)])
    policy = {
        "metadata": {"name": "p", "namespace": "team-b"},
        "spec": {
            "podSelector": {
                "matchExpressions": [{"key": "app", "operator": "In", "values": ["t"]}]
            },
            "ingress": [
                {"from": [{"namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": "team-a"}}}],
                 "ports": [{"port": "http"}, {"port": "grpc"}]},
                {"from": [{"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.9.0/24"]}}],
                 "ports": [{"protocol": "UDP", "port": 5000, "endPort": 5010}]},
            ],
        },
    }  # fmt: skip
    allows = ingress_allows(target, [policy], PODS, NAMESPACES)
    assert allows == [
        Allow(("10.0.0.1", "10.0.0.2", "10.0.0.3"), (), (("tcp", 8080, 8080),)),
        Allow(("192.168.0.0/16",), ("192.168.9.0/24",), (("udp", 5000, 5010),)),
    ]


def test_selectors() -> None:
    assert selects({}, {}) and not selects(None, {"a": "1"})
    expr = {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]},
                                 {"key": "b", "operator": "Exists"}]}  # fmt: skip
    assert selects(expr, {"b": ""}) and not selects(expr, {"a": "1", "b": ""})
    assert not selects({"matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]}, {"b": ""})


def test_the_ruleset_replaces_the_table_in_one_script() -> None:
    script = ruleset([Allow(("10.0.0.3",), (), (("tcp", 8001, 8001),)), Allow(None)], ["10.9.9.9"])
    assert script.startswith("table ip cascade_policy\ndelete table ip cascade_policy\n")
    assert "policy drop;" in script and "ct state established,related accept" in script
    assert "ip saddr { 10.0.0.3 } tcp dport 8001 accept" in script
    assert "ip saddr { 10.9.9.9 } accept" in script and "\n    accept\n" in script
    assert "chain" not in ruleset(None, ["10.9.9.9"])  # not isolated: no table at all


@pytest.mark.skipif(shutil.which("nft") is None or os.geteuid() != 0, reason="needs nft and root")
def test_nft_takes_the_ruleset_in_a_namespace() -> None:
    allows = ingress_allows(WORKER, network_policies(REF, CFG), PODS, NAMESPACES)
    netns = f"cxt-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    try:
        for script in (
            ruleset(allows, ["10.9.9.9"]),
            ruleset(allows, ["10.9.9.9"]),
            ruleset(None, []),
        ):
            done = subprocess.run(
                ["ip", "netns", "exec", netns, "nft", "-f", "-"],
                input=script, capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        listed = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "ruleset"],
                                capture_output=True, text=True, check=True)  # fmt: skip
        assert "cascade_policy" not in listed.stdout
    finally:
        subprocess.run(["ip", "netns", "del", netns], check=False)


def test_the_agents_own_pods_count_with_their_address_before_the_api_shows_it() -> None:
    from cascade_dev.nodeagent.policies import LocalPod, with_local_ips

    new = pod("llama-2", "team-a", "", labels("llama", c.COMPONENT_WORKER))
    del new["status"]["podIP"]
    unlisted = pod("llama-3", "team-a", "", labels("llama", c.COMPONENT_WORKER))
    local = [LocalPod(new, "cxp-2", "10.0.0.7"), LocalPod(unlisted, "cxp-3", "10.0.0.8")]
    pods = with_local_ips([*PODS, new], local)
    allows = ingress_allows(WORKER, network_policies(REF, CFG), pods, NAMESPACES)
    assert admitted(allows, "10.0.0.7", c.DATA_PORT) and admitted(allows, "10.0.0.8", c.DATA_PORT)
    assert new["status"] == {}  # the API's copy is left as it was
