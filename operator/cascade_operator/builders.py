"""Pure builders of the objects a ModelDeployment owns: worker Pods, gateway Deployment
and Service. Plain dicts in, plain dicts out, so they are unit-tested without a cluster
and the handlers only send what these return.
"""

from __future__ import annotations

from typing import Any

from cascade_api import constants as c
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import hardening, pod_options
from cascade_operator.config import OperatorConfig
from cascade_operator.model_volume import model_volume
from cascade_operator.observed import START_ANNOTATION, START_STORAGE, MdRef
from cascade_operator.scrape import scrape_annotations
from cascade_protocol.peer_auth import token_env

Manifest = dict[str, Any]


def selector_labels(md: str, component: str) -> dict[str, str]:
    return {c.LABEL_DEPLOYMENT: md, c.LABEL_COMPONENT: component}


def labels(md: str, component: str) -> dict[str, str]:
    return {
        c.LABEL_NAME: f"cascade-{component}",
        c.LABEL_MANAGED_BY: c.MANAGED_BY,
        **selector_labels(md, component),
    }


def component_selector(md: str, component: str) -> str:
    """The label selector string of one component's pods."""
    return ",".join(f"{k}={v}" for k, v in selector_labels(md, component).items())


def worker_selector(md: str) -> str:
    """The /scale subresource's selector string (status.selector)."""
    return component_selector(md, c.COMPONENT_WORKER)


def owner_reference(ref: MdRef) -> Manifest:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.MD_KIND,
        "name": ref.name,
        "uid": ref.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_name(md: str, index: int) -> str:
    return f"{md}-{index}"


def gateway_name(md: str) -> str:
    return f"{md}-gateway"


def served_name(ref: MdRef, spec: ModelDeploymentSpec) -> str:
    return spec.model.served_name or ref.name


def _field_env(name: str, path: str) -> Manifest:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def on_off(flag: bool) -> str:
    return "on" if flag else "off"


def _probe(path: str, period: int, failures: int) -> Manifest:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": 2,
    }


def worker_pod(
    ref: MdRef,
    spec: ModelDeploymentSpec,
    index: int,
    cfg: OperatorConfig,
    start: str = START_STORAGE,
) -> Manifest:
    # storage: load CASCADE_MODEL_PATH at start and serve it. await: hold nothing until a
    # plan streams the weights, then serve when told. Ready = serving.
    serve = {"name": "CASCADE_SERVE", "value": "1" if start == START_STORAGE else "await"}
    pod = process_pod(ref, spec, cfg, pod_name(ref.name, index), c.COMPONENT_WORKER, [serve])
    pod["metadata"]["annotations"] = {
        **(pod["metadata"].get("annotations") or {}),
        f"{c.GROUP}/instance-index": str(index),
        START_ANNOTATION: start,
        **scrape_annotations(c.WORKER_PORT),
    }
    container = pod["spec"]["containers"][0]
    pod_options.give_accelerators(container, spec, cfg)
    container["securityContext"] = hardening.worker_context(spec.instance.gpus, cfg)
    return pod


def process_pod(
    ref: MdRef,
    spec: ModelDeploymentSpec,
    cfg: OperatorConfig,
    name: str,
    component: str,
    env_tail: list[Manifest],
) -> Manifest:
    """A pod running the worker process (an instance or a host copy): identity, model,
    engine settings and probes; the caller adds what its role needs."""
    model_path, volumes, mounts = model_volume(spec)
    env = [
        _field_env("POD_NAME", "metadata.name"),
        _field_env("POD_NAMESPACE", "metadata.namespace"),
        _field_env("POD_IP", "status.podIP"),
        _field_env("NODE_NAME", "spec.nodeName"),
        {"name": "CASCADE_DEPLOYMENT", "value": ref.name},
        token_env(ref.name),  # the deployment's peer token (cascade_protocol.peer_auth)
        token_env(ref.name, generate=True),  # what its gateway presents to generate
        {"name": "CASCADE_MODEL_URI", "value": spec.model.uri},
        {"name": "CASCADE_MODEL_DIGEST", "value": spec.model.digest or ""},  # the pin
        {"name": "CASCADE_MODEL_PATH", "value": model_path},
        {"name": "CASCADE_SERVED_NAME", "value": served_name(ref, spec)},
        {"name": "CASCADE_DEVICE", "value": str(spec.engine.device)},
        {"name": "CASCADE_DTYPE", "value": str(spec.engine.dtype)},
        {"name": "CASCADE_MAX_MODEL_LEN", "value": str(spec.engine.max_model_len)},
        {"name": "CASCADE_MAX_BATCH_SIZE", "value": str(spec.engine.max_batch_size)},
        {
            "name": "CASCADE_PREFILL_TOKENS_PER_STEP",
            "value": str(spec.engine.max_prefill_tokens_per_step),
        },
        # The local autoscaler (Chiron Algorithm 1) and the ITL SLOs it holds.
        {"name": "CASCADE_ADAPTIVE_BATCH", "value": on_off(spec.engine.adaptive_batch)},
        {"name": "CASCADE_INTERACTIVE_ITL_SLO_MS", "value": str(spec.slo.interactive.itl_ms)},
        {"name": "CASCADE_BATCH_ITL_SLO_MS", "value": str(spec.slo.batch.itl_ms)},
        {"name": "CASCADE_BLOCKS", "value": str(spec.multicast.blocks)},  # at most one per layer
        # Restore materialized start-up state offered with the weights, and carry it on.
        {"name": "CASCADE_MATERIALIZATION", "value": on_off(spec.materialization.enabled)},
        *env_tail,
    ]
    container: Manifest = {
        "name": "worker",
        "image": cfg.worker_image,
        "args": ["--port", str(c.WORKER_PORT)],
        "env": env,
        "ports": [{"name": "http", "containerPort": c.WORKER_PORT, "protocol": "TCP"}],
        # Every second: a new worker joins the gateway's pool as soon as it serves
        # (period 2 cost a second on average per scale-up); still 6 s of failures to unready.
        "readinessProbe": _probe(c.READY_PATH, period=1, failures=6),
        "livenessProbe": _probe(c.HEALTH_PATH, period=10, failures=6),
    }
    if mounts:
        container["volumeMounts"] = mounts
    pod_spec: Manifest = {
        "containers": [container],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "enableServiceLinks": False,
        "nodeSelector": dict(spec.instance.node_selector),
        "tolerations": [t.to_api() for t in spec.instance.tolerations],
    }
    if volumes:
        pod_spec["volumes"] = volumes
    pod: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": labels(ref.name, component),
            "ownerReferences": [owner_reference(ref)],
        },
        "spec": pod_spec,
    }
    pod_options.apply_worker_options(pod, spec, cfg)
    pod["spec"] = hardening.hardened(pod["spec"])
    return pod


def gateway_deployment(ref: MdRef, spec: ModelDeploymentSpec, cfg: OperatorConfig) -> Manifest:
    name = gateway_name(ref.name)
    pod_labels = labels(ref.name, c.COMPONENT_GATEWAY)
    container = {
        "name": "gateway",
        "image": cfg.gateway_image,
        "args": ["--port", str(c.GATEWAY_PORT)],
        "env": [
            _field_env("POD_NAME", "metadata.name"),
            _field_env("POD_NAMESPACE", "metadata.namespace"),
            _field_env("POD_IP", "status.podIP"),
            {"name": "CASCADE_DEPLOYMENT", "value": ref.name},
            {"name": "CASCADE_MODEL_NAME", "value": served_name(ref, spec)},
            token_env(ref.name, generate=True),  # generate and load only, never control
            {"name": "CASCADE_WORKER_SELECTOR", "value": worker_selector(ref.name)},
            {"name": "CASCADE_DISCOVERY", "value": "kubernetes"},
            {"name": "CASCADE_QUEUE_ORDER", "value": str(spec.slo.queue_order)},
            # Queue deadlines and the batch queue's request groups (Algorithm 2).
            {"name": "CASCADE_INTERACTIVE_TTFT_SLO_MS", "value": str(spec.slo.interactive.ttft_ms)},
            {"name": "CASCADE_BATCH_TTFT_SLO_MS", "value": str(spec.slo.batch.ttft_ms)},
        ],
        "ports": [{"name": "http", "containerPort": c.GATEWAY_PORT, "protocol": "TCP"}],
        "readinessProbe": _probe(c.READY_PATH, period=2, failures=3),
        "livenessProbe": _probe(c.HEALTH_PATH, period=10, failures=6),
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    pod_spec = {"containers": [container], "serviceAccountName": name, "enableServiceLinks": False}
    pod_options.pull_secrets(pod_spec, cfg)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": pod_labels,
            "ownerReferences": [owner_reference(ref)],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector_labels(ref.name, c.COMPONENT_GATEWAY)},
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": scrape_annotations(c.GATEWAY_PORT),
                },
                "spec": hardening.hardened(pod_spec, hardening.GATEWAY_SCRATCH, api_token=True),
            },
        },
    }


def gateway_access(ref: MdRef) -> list[Manifest]:
    """ServiceAccount, Role and RoleBinding that let the gateway find its workers.

    The gateway discovers worker pods itself (like llm-d's endpoint picker watching an
    InferencePool) so routing follows pods within seconds, without the operator in the
    request path. It may only read pods, and only in its own namespace.
    """
    name = gateway_name(ref.name)
    meta = {
        "name": name,
        "namespace": ref.namespace,
        "labels": labels(ref.name, c.COMPONENT_GATEWAY),
        "ownerReferences": [owner_reference(ref)],
    }
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
            ],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ref.namespace}],
        },
    ]


def gateway_service(ref: MdRef) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": gateway_name(ref.name),
            "namespace": ref.namespace,
            "labels": labels(ref.name, c.COMPONENT_GATEWAY),
            "ownerReferences": [owner_reference(ref)],
        },
        "spec": {
            "selector": selector_labels(ref.name, c.COMPONENT_GATEWAY),
            "ports": [{"name": "http", "port": c.GATEWAY_PORT, "targetPort": "http"}],
        },
    }


def gateway_endpoint(ref: MdRef) -> str:
    return f"http://{gateway_name(ref.name)}.{ref.namespace}.svc:{c.GATEWAY_PORT}"
