"""The controller's reconcile against an in-memory API server and workers: one read of
everything, both deciders, one status write, events told once, no churn when nothing
changed, and blocksLoaded from each worker's own status."""

from __future__ import annotations

from datetime import timedelta

from controller_world import B, conditions, reconcile, run_pod, serving, status, world
from operator_fixtures import REF, FakeCluster

from cascade_api import constants as c
from cascade_api.base import utcnow
from cascade_operator.builders import worker_selector
from cascade_operator.host_copies import host_copy_selector
from cascade_operator.node_loss import LOST_AFTER_S, disrupted, lost_nodes
from cascade_operator.peer_secret import token_of
from cascade_protocol.peer_auth import GENERATE_KEY, secret_name, token_env
from cascade_protocol.status import WorkerStatus


def test_first_reconcile_creates_pods_gateway_and_a_status() -> None:
    controller, cluster, _ = world(2)
    reconcile(controller)
    pods = cluster.list_pods(REF.namespace, worker_selector(REF.name))
    assert [p["metadata"]["name"] for p in pods] == ["llama-0", "llama-1"]
    # And one host copy (spec.hostCopies defaults to 1), not an instance.
    (copy,) = cluster.list_pods(REF.namespace, host_copy_selector(REF.name))
    assert copy["metadata"]["name"] == "llama-host-0"
    assert [p["metadata"]["annotations"]["cascade.dev/start"] for p in pods] == [
        "storage",
        "await",
    ]
    kinds = {k for k, ns, name in cluster.objects if name == "llama-gateway"}
    assert kinds == {
        "Deployment",
        "Service",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
    }
    assert ("NetworkPolicy", REF.namespace, "llama-workers") in cluster.objects
    got = status(cluster)  # what existed when it looked: nothing yet
    assert (got["observedGeneration"], got["replicas"], got["readyReplicas"]) == (1, 0, 0)
    assert conditions(cluster)["Progressing"]["reason"] == "ScalingUp"
    assert [e.reason for e in cluster.events][:1] == ["ScalingUp"]
    reconcile(controller)
    assert status(cluster)["replicas"] == 2
    assert conditions(cluster)["Progressing"]["reason"] == "InstancesLoading"
    assert len(cluster.list_pods(REF.namespace, "")) == 3  # no duplicates on a repeat


def test_instances_show_the_blocks_each_worker_holds_and_a_plan_streams_to_the_new_one() -> None:
    controller, cluster, workers = world(2)
    reconcile(controller)
    run_pod(cluster, "llama-0", "10.0.0.1", ready=True)
    run_pod(cluster, "llama-1", "10.0.0.2", ready=False)
    workers.by_ip["10.0.0.1"] = serving("llama-0")
    workers.by_ip["10.0.0.2"] = WorkerStatus(pod="llama-1", phase="idle")
    reconcile(controller)
    got = status(cluster)
    assert [(i["pod"], i["blocksLoaded"]) for i in got["instances"]] == [
        ("llama-0", B),
        ("llama-1", 0),
    ]
    plans = cluster.list_scaleplans(REF.namespace, "")
    assert len(plans) == 1 and plans[0]["spec"]["targets"] == ["llama-1"]
    assert got["currentPlan"] == plans[0]["metadata"]["name"]
    assert conditions(cluster)["Planned"]["reason"] == "PlanCreated"
    assert "ScalePlanCreated" in [e.reason for e in cluster.events]
    # The target reports progress: the next reconcile shows it in the status.
    workers.by_ip["10.0.0.2"] = WorkerStatus(
        pod="llama-1", phase="transferring", model_digest="m1", blocks_loaded=3, blocks_total=B
    )
    reconcile(controller)
    assert [i["blocksLoaded"] for i in status(cluster)["instances"]] == [B, 3]
    # A worker that does not answer keeps its last figure rather than dropping to 0.
    del workers.by_ip["10.0.0.2"]
    reconcile(controller)
    assert [i["blocksLoaded"] for i in status(cluster)["instances"]] == [B, 3]


def test_a_converged_deployment_writes_nothing_and_tells_nothing() -> None:
    controller, cluster, workers = world(1)
    reconcile(controller)
    run_pod(cluster, "llama-0", "10.0.0.1", ready=True)
    cluster.objects[("Deployment", REF.namespace, "llama-gateway")]["status"] = {
        "availableReplicas": 1
    }
    workers.by_ip["10.0.0.1"] = serving("llama-0")
    reconcile(controller)
    assert conditions(cluster)["Available"]["status"] == "True"
    writes, told = cluster.status_writes, len(cluster.events)
    reconcile(controller)
    reconcile(controller)
    assert (cluster.status_writes, len(cluster.events)) == (writes, told)


def test_an_invalid_spec_keeps_the_pods_and_says_which_field() -> None:
    controller, cluster, _ = world(1)
    reconcile(controller)
    body = cluster.get_md(REF.namespace, REF.name)
    assert body is not None
    body["spec"]["scaling"] = {"minReplicas": 3, "maxReplicas": 2}
    body["spec"]["replicas"] = 3
    body["metadata"]["generation"] = 2
    reconcile(controller)
    pods = cluster.list_pods(REF.namespace, worker_selector(REF.name))
    assert [p["metadata"]["name"] for p in pods] == ["llama-0"]
    degraded = conditions(cluster)["Degraded"]
    assert degraded["reason"] == "InvalidSpec" and "spec.scaling" in degraded["message"]
    assert ("Warning", "InvalidSpec") in [(e.type, e.reason) for e in cluster.events]


def test_a_deleted_deployment_is_left_alone() -> None:
    controller, cluster, _ = world(1)
    cluster.objects.clear()
    reconcile(controller)  # gone between the event and the reconcile: nothing to do
    assert cluster.objects == {}


def test_the_deployment_gets_one_peer_token_its_pods_and_requests_carry() -> None:
    controller, cluster, workers = world(2)
    reconcile(controller)
    secret = cluster.objects[("Secret", REF.namespace, secret_name(REF.name))]
    token = token_of(secret)
    assert token is not None and len(token) >= 43
    assert secret["metadata"]["ownerReferences"][0]["name"] == REF.name
    gateway = cluster.objects[("Deployment", REF.namespace, "llama-gateway")]
    pods = [*cluster.list_pods(REF.namespace, f"{c.LABEL_DEPLOYMENT}={REF.name}")]
    gateway_container = gateway["spec"]["template"]["spec"]["containers"][0]
    for container in [p["spec"]["containers"][0] for p in pods]:  # workers, the host copy
        assert token_env(REF.name) in container["env"]
        assert token_env(REF.name, generate=True) in container["env"]  # to check the gateway
        assert token not in str(container)  # by reference only
    # The gateway holds only the generate token: it cannot drive the control API.
    assert token_env(REF.name, generate=True) in gateway_container["env"]
    assert token_env(REF.name) not in gateway_container["env"]
    assert token_of(secret, GENERATE_KEY) not in (None, token)
    run_pod(cluster, "llama-0", "10.0.0.1", ready=False)
    reconcile(controller)
    # The same token (made once), and the worker client presents it to the pod.
    assert token_of(cluster.objects[("Secret", REF.namespace, secret_name(REF.name))]) == token
    assert workers.tokens == {"10.0.0.1": token}


def test_pods_on_a_lost_node_are_force_deleted_and_replaced_at_once() -> None:
    controller, cluster, _ = world(2, hostCopies=0)
    reconcile(controller)
    run_pod(cluster, "llama-0", "10.0.0.1", ready=True)
    run_pod(cluster, "llama-1", "10.0.0.2", ready=True)
    lost_since = "2026-11-25T10:00:00Z"  # long before now: past LOST_AFTER_S
    cluster.nodes[1]["status"] = {
        "conditions": [{"type": "Ready", "status": "Unknown", "lastTransitionTime": lost_since}]
    }
    assert cluster.objects[("Pod", REF.namespace, "llama-1")]["spec"]["nodeName"] == "n1"
    controller.observer._nodes_read = -1e9  # the node list is read again now
    reconcile(controller)
    assert cluster.forced == ["llama-1"]
    # Replaced in the same reconcile: the name is free again, the pod is a new one.
    again = cluster.objects[("Pod", REF.namespace, "llama-1")]
    assert "nodeName" not in again["spec"] and again["status"]["phase"] == "Pending"
    assert cluster.objects[("Pod", REF.namespace, "llama-0")]["spec"]["nodeName"] == "n0"
    lost = [e for e in cluster.events if e.reason == "NodeLost"]
    assert len(lost) == 1 and "n1" in lost[0].message and "llama-1" in lost[0].message
    # A node not Ready only for a moment is not lost yet.
    just_now = utcnow().isoformat()
    cluster.nodes[2]["status"] = {
        "conditions": [{"type": "Ready", "status": "Unknown", "lastTransitionTime": just_now}]
    }
    assert lost_nodes(cluster.nodes, utcnow()) == {"n1"}


def test_most_nodes_not_ready_at_once_is_a_control_plane_blip_not_node_loss() -> None:
    cluster = FakeCluster(nodes=4)
    stale = {"conditions": [{"type": "Ready", "status": "Unknown",
                             "lastTransitionTime": "2026-11-25T10:00:00Z"}]}  # fmt: skip
    for node in cluster.nodes[:2]:
        node["status"] = stale
    assert lost_nodes(cluster.nodes, utcnow()) == {"n0", "n1"}  # half: still node loss
    cluster.nodes[2]["status"] = stale
    assert lost_nodes(cluster.nodes, utcnow()) == set()  # 3 of 4: the API, not the nodes


def test_after_a_disruption_a_node_not_ready_since_then_is_not_lost_until_its_clock_runs() -> None:
    """The nodes come back one by one after an API server outage: the stragglers, not
    Ready since the disruption, count their time from its end (calm_since)."""
    cluster = FakeCluster(nodes=4)
    stale = {"conditions": [{"type": "Ready", "status": "Unknown",
                             "lastTransitionTime": "2026-11-25T10:00:00Z"}]}  # fmt: skip
    for node in cluster.nodes[:3]:
        node["status"] = stale
    assert disrupted(cluster.nodes) and lost_nodes(cluster.nodes, utcnow()) == set()
    calm = utcnow()
    cluster.nodes[0]["status"] = cluster.nodes[1]["status"] = {}  # renewed: Ready again
    assert not disrupted(cluster.nodes)
    assert lost_nodes(cluster.nodes, utcnow()) == {"n2"}  # without the disruption's end
    assert lost_nodes(cluster.nodes, calm + timedelta(seconds=5), calm_since=calm) == set()
    later = calm + timedelta(seconds=LOST_AFTER_S)
    assert lost_nodes(cluster.nodes, later, calm_since=calm) == {"n2"}  # silent since


def test_the_operator_remembers_the_disruption_it_saw() -> None:
    controller, cluster, _ = world(2, hostCopies=0)
    reconcile(controller)
    run_pod(cluster, "llama-0", "10.0.0.1", ready=True)
    run_pod(cluster, "llama-1", "10.0.0.2", ready=True)
    assert cluster.objects[("Pod", REF.namespace, "llama-1")]["spec"]["nodeName"] == "n1"
    stale = {"conditions": [{"type": "Ready", "status": "Unknown",
                             "lastTransitionTime": "2026-11-25T10:00:00Z"}]}  # fmt: skip
    for node in cluster.nodes:
        node["status"] = stale
    controller.observer._nodes_read = -1e9
    reconcile(controller)  # every node not Ready: a disruption, nothing taken back
    assert cluster.forced == []
    for node in cluster.nodes:
        if node["metadata"]["name"] != "n1":
            node["status"] = {}  # renewed
    controller.observer._nodes_read = -1e9
    reconcile(controller)  # n1 the straggler, not Ready (for this count) since the disruption
    assert cluster.forced == []
