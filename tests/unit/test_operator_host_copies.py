"""Host-copy pods: built apart from instances, kept at spec.hostCopies, filled by plans,
and what a scale from zero awaits."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller_world import reconcile, run_pod, serving, status, world
from operator_fixtures import MODEL_URI, REF, md, pod

from cascade_api import constants as c
from cascade_operator.builders import worker_selector
from cascade_operator.config import OperatorConfig
from cascade_operator.host_copies import decide_host_copies, host_copy_pod, host_copy_selector
from cascade_operator.observed import PodView
from cascade_protocol.status import WorkerRole, WorkerStatus

CFG = OperatorConfig()
B = 8


def test_a_host_copy_pod_is_the_worker_in_its_role_anti_affine_with_its_peers() -> None:
    m = host_copy_pod(REF, md(), 1, CFG)
    assert m["metadata"]["name"] == "llama-host-1"
    assert m["metadata"]["labels"][c.LABEL_COMPONENT] == c.COMPONENT_HOST_COPY
    env = {e["name"]: e.get("value") for e in m["spec"]["containers"][0]["env"]}
    assert env["CASCADE_ROLE"] == "host-copy" and "CASCADE_SERVE" not in env
    assert env["CASCADE_MODEL_URI"] == MODEL_URI
    assert "resources" not in m["spec"]["containers"][0]  # no GPU: it runs no engine
    anti = m["spec"]["affinity"]["podAntiAffinity"]
    (required,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["topologyKey"] == "kubernetes.io/hostname"
    assert required["labelSelector"]["matchLabels"] == {
        c.LABEL_DEPLOYMENT: "llama",
        c.LABEL_COMPONENT: c.COMPONENT_HOST_COPY,
    }
    (preferred,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["topologyKey"] == c.LABEL_LEAF


def test_host_copies_are_kept_at_the_wanted_count() -> None:
    def host(i: int, **kw: Any) -> PodView:
        return replace(pod(i, host_copy=True, **kw), name=f"llama-host-{i}")

    d = decide_host_copies(REF, md(hostCopies=2), [], CFG)
    assert [m["metadata"]["name"] for m in d.create] == ["llama-host-0", "llama-host-1"]
    # A failed one is replaced under a free index; a terminating one keeps its index.
    pods = [host(0, phase="Failed"), host(1, terminating=True), host(2)]
    d = decide_host_copies(REF, md(hostCopies=2), pods, CFG)
    assert [m["metadata"]["name"] for m in d.create] == ["llama-host-3"]
    assert d.delete == ["llama-host-0"]
    # Fewer wanted: the highest index goes.
    d = decide_host_copies(REF, md(hostCopies=1), [host(0), host(1)], CFG)
    assert d.create == [] and d.delete == ["llama-host-1"]
    assert decide_host_copies(REF, md(hostCopies=0), [], CFG).create == []


def host_status(name: str, **kw: Any) -> WorkerStatus:
    return WorkerStatus(pod=name, role=WorkerRole.HOST_COPY, **kw)


def test_host_copies_are_filled_by_a_plan_and_a_scale_from_zero_awaits_them() -> None:
    controller, cluster, workers = world(1)
    reconcile(controller)
    hosts = cluster.list_pods(REF.namespace, host_copy_selector(REF.name))
    assert [p["metadata"]["name"] for p in hosts] == ["llama-host-0"]
    run_pod(cluster, "llama-0", "10.0.0.1", ready=True)
    run_pod(cluster, "llama-host-0", "10.0.0.9", ready=False)
    workers.by_ip["10.0.0.1"] = serving("llama-0")
    workers.by_ip["10.0.0.9"] = host_status("llama-host-0", phase="idle")
    reconcile(controller)
    (plan,) = cluster.list_scaleplans(REF.namespace, "")
    assert plan["spec"]["targets"] == ["llama-host-0"]
    assert plan["spec"]["sources"] == [{"pod": "llama-0", "tier": "gpu"}]
    # Filled: it holds the model; no serve order ever goes to it.
    workers.by_ip["10.0.0.9"] = host_status(
        "llama-host-0",
        phase="ready",
        model_digest="m1",
        blocks_loaded=B,
        blocks_total=B,
        store_bytes=4096,
    )
    reconcile(controller)
    assert not [o for o in workers.sent if o.pod == "llama-host-0" and "serve" in o.path]
    shown = status(cluster)["hostCopies"]
    assert shown == [{"pod": "llama-host-0", "node": "n0", "ready": True, "bytesHeld": 4096}]
    # Scale to zero: the instance goes, the host copy stays.
    cluster.scale_md(REF.namespace, REF.name, 0)
    reconcile(controller)
    del cluster.objects[("Pod", REF.namespace, "llama-0")]
    reconcile(controller)
    assert cluster.list_pods(REF.namespace, worker_selector(REF.name)) == []
    assert len(cluster.list_pods(REF.namespace, host_copy_selector(REF.name))) == 1
    # And back to one: the new instance awaits a plan from the host copy.
    cluster.scale_md(REF.namespace, REF.name, 1)
    reconcile(controller)
    (new,) = cluster.list_pods(REF.namespace, worker_selector(REF.name))
    assert new["metadata"]["annotations"]["cascade.dev/start"] == "await"
