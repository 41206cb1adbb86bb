"""Manifests the operator sends: worker pods, gateway Deployment and Service, views."""

from __future__ import annotations

from operator_fixtures import REF

from cascade_api import constants as c
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import builders
from cascade_operator.config import OperatorConfig
from cascade_operator.observed import GatewayView, PodView

CFG = OperatorConfig(worker_image="reg/cascade-worker:9", gateway_image="reg/cascade-gateway:9")


def spec(**kw: object) -> ModelDeploymentSpec:
    return ModelDeploymentSpec.model_validate({"model": {"uri": "file:///m/tiny"}, **kw})


def env(container: dict[str, object]) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}  # type: ignore[index,attr-defined,union-attr]


def test_worker_pod_is_owned_labelled_and_shaped() -> None:
    s = spec(
        instance={
            "gpus": 2,
            "nodeSelector": {c.LABEL_GPU_PRODUCT: "H100"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "resources": {"requests": {"cpu": 4}},
        }
    )
    pod = builders.worker_pod(REF, s, 3, CFG)
    meta, pspec = pod["metadata"], pod["spec"]
    assert meta["name"] == "llama-3"
    assert meta["labels"][c.LABEL_DEPLOYMENT] == "llama"
    assert meta["ownerReferences"][0] | {} == {
        "apiVersion": "cascade.dev/v1alpha1",
        "kind": "ModelDeployment",
        "name": "llama",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    container = pspec["containers"][0]
    assert container["image"] == "reg/cascade-worker:9"
    assert container["resources"]["limits"][c.GPU_RESOURCE] == "2"
    # No RDMA resource unless the chart names the cluster's (rdma.resourceName).
    assert container["resources"]["requests"] == {"cpu": "4", c.GPU_RESOURCE: "2"}
    assert pspec["nodeSelector"] == {c.LABEL_GPU_PRODUCT: "H100"}
    assert pspec["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert container["readinessProbe"]["httpGet"]["path"] == c.READY_PATH
    # Probed every second (a serving worker joins the pool soon), unready after 6 s.
    assert container["readinessProbe"]["periodSeconds"] == 1
    assert container["readinessProbe"]["failureThreshold"] == 6
    assert env(container)["CASCADE_MODEL_PATH"] == "/m/tiny"
    assert env(container)["CASCADE_SERVED_NAME"] == "llama"
    assert env(container)["CASCADE_SERVE"] == "1"  # Ready means the engine serves


def test_pvc_model_is_mounted_read_only() -> None:
    pod = builders.worker_pod(REF, spec(model={"uri": "pvc://weights/llama/8b"}), 0, CFG)
    volume = pod["spec"]["volumes"][0]
    assert volume["persistentVolumeClaim"] == {"claimName": "weights", "readOnly": True}
    container = pod["spec"]["containers"][0]
    assert container["volumeMounts"][0]["mountPath"] == "/mnt/models/weights"
    assert env(container)["CASCADE_MODEL_PATH"] == "/mnt/models/weights/llama/8b"


def test_cpu_only_instance_requests_no_gpu() -> None:
    pod = builders.worker_pod(REF, spec(instance={"gpus": 0}), 0, CFG)
    assert pod["spec"]["containers"][0]["resources"] == {}


def test_gateway_objects_select_the_gateway_pods() -> None:
    dep = builders.gateway_deployment(REF, spec(model={"uri": "file:///m", "servedName": "x"}), CFG)
    svc = builders.gateway_service(REF)
    template_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= template_labels.items()
    assert svc["spec"]["selector"].items() <= template_labels.items()
    assert env(dep["spec"]["template"]["spec"]["containers"][0])["CASCADE_MODEL_NAME"] == "x"
    assert builders.gateway_endpoint(REF) == "http://llama-gateway.models.svc:8000"


def test_gateway_may_read_only_pods_of_its_namespace_under_its_own_account() -> None:
    dep = builders.gateway_deployment(REF, spec(model={"uri": "file:///m"}), CFG)
    account, role, binding = builders.gateway_access(REF)
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert (
        env(dep["spec"]["template"]["spec"]["containers"][0])["CASCADE_DISCOVERY"] == "kubernetes"
    )
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "llama-gateway", "namespace": "models"}
    ]
    for obj in (account, role, binding):
        assert obj["metadata"]["namespace"] == "models"
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "ModelDeployment"


def test_pod_view_reads_status() -> None:
    body = {
        "metadata": {"name": "llama-4", "annotations": {"cascade.dev/instance-index": "4"}},
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
        },
    }
    view = PodView.of(body)
    assert (view.index, view.node, view.ready, view.crash_looping) == (4, "n1", True, True)
    pending = PodView.of(
        {
            "metadata": {"name": "llama-x", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "reason": "Unschedulable", "message": "no gpu"}
                ]
            },
        }
    )
    assert pending.index == -1 and pending.terminating and pending.unschedulable == "no gpu"
    assert GatewayView.of({"status": {"availableReplicas": 1}}, None) == GatewayView(True, False, 1)


def test_gateway_gets_the_ttft_slos_for_its_deadlines() -> None:
    s = spec(model={"uri": "file:///m"}, slo={"interactive": {"ttftMs": 500}})
    dep = builders.gateway_deployment(REF, s, CFG)
    env = {
        e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["CASCADE_INTERACTIVE_TTFT_SLO_MS"] == "500"
    assert env["CASCADE_BATCH_TTFT_SLO_MS"] == "60000"
    assert env["CASCADE_QUEUE_ORDER"] == "OnTimeFirst"
    fifo = spec(model={"uri": "file:///m"}, slo={"queueOrder": "FIFO"})
    dep = builders.gateway_deployment(REF, fifo, CFG)
    env = {
        e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["CASCADE_QUEUE_ORDER"] == "FIFO"


def test_worker_gets_the_local_autoscaler_switch_and_itl_slos() -> None:
    s = spec(model={"uri": "file:///m"}, slo={"interactive": {"itlMs": 40}})
    env = {
        e["name"]: e.get("value")
        for e in builders.worker_pod(REF, s, 0, CFG)["spec"]["containers"][0]["env"]
    }
    assert (env["CASCADE_ADAPTIVE_BATCH"], env["CASCADE_INTERACTIVE_ITL_SLO_MS"]) == ("on", "40")
    assert env["CASCADE_BATCH_ITL_SLO_MS"] == "1000"
    assert env["CASCADE_PREFILL_TOKENS_PER_STEP"] == "512"  # engine.maxPrefillTokensPerStep
    off = spec(model={"uri": "file:///m"}, engine={"adaptiveBatch": False})
    env = {
        e["name"]: e.get("value")
        for e in builders.worker_pod(REF, off, 0, CFG)["spec"]["containers"][0]["env"]
    }
    assert env["CASCADE_ADAPTIVE_BATCH"] == "off"
