"""What a cluster needs of every pod the operator builds beyond what Cascade decides:
its resources (the instance's GPUs, the RDMA device), registry credentials (chart
imagePullSecrets), the container runtime that exposes GPUs (runtimeClassName),
annotations such as a Multus network, the UCX transports and interfaces of the data
plane, extra environment, and a /dev/shm big enough for UCX.

The chart sets the cluster-wide values (OperatorConfig); a ModelDeployment's
`spec.instance` adds to or overrides them for its worker-process pods (instances, host
copies, profile Jobs). Pure: manifests in, manifests out.
"""

from __future__ import annotations

from typing import Any

from cascade_api import constants as c
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import hardening
from cascade_operator.config import OperatorConfig

Manifest = dict[str, Any]
SHM_VOLUME = "dshm"


def worker_resources(spec: ModelDeploymentSpec, cfg: OperatorConfig) -> Manifest:
    shape = spec.instance
    # Quantities travel as strings: the API accepts "4" where a bare 4 is refused.
    requests = {k: str(v) for k, v in shape.resources.requests.items()}
    limits = {k: str(v) for k, v in shape.resources.limits.items()}
    if shape.gpus:
        # Extended resources must be equal in requests and limits.
        requests[c.GPU_RESOURCE] = limits[c.GPU_RESOURCE] = str(shape.gpus)
    if hardening.uses_rdma(shape.gpus, cfg):  # the RDMA device plugin's name and count
        requests[cfg.rdma_resource] = limits[cfg.rdma_resource] = str(cfg.rdma_count)
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


def give_accelerators(container: Manifest, spec: ModelDeploymentSpec, cfg: OperatorConfig) -> None:
    """The instance's resources, and the GPU count the worker's `auto` device reads
    (engine/device.py): a pod that was given GPUs must find CUDA."""
    container["resources"] = worker_resources(spec, cfg)
    container["env"].append({"name": "CASCADE_GPUS", "value": str(spec.instance.gpus)})


def pull_secrets(pod_spec: Manifest, cfg: OperatorConfig) -> None:
    """The chart's imagePullSecrets on any pod the operator makes (the gateway's too)."""
    if cfg.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in cfg.image_pull_secrets]


def worker_env(cfg: OperatorConfig, spec: ModelDeploymentSpec) -> list[Manifest]:
    """The data plane's UCX settings from the chart, then the instance's own env (which
    wins: a later entry of the same name overrides an earlier one)."""
    ucx = (("UCX_TLS", cfg.ucx_tls), ("UCX_NET_DEVICES", cfg.ucx_net_devices))
    env = [{"name": k, "value": v} for k, v in ucx if v]
    return env + [{"name": e.name, "value": e.value} for e in spec.instance.env]


def apply_worker_options(pod: Manifest, spec: ModelDeploymentSpec, cfg: OperatorConfig) -> None:
    """Pull secrets, runtime class, annotations, env and /dev/shm on a worker-process pod."""
    pod_spec, shape = pod["spec"], spec.instance
    pull_secrets(pod_spec, cfg)
    runtime = shape.runtime_class_name or cfg.worker_runtime_class
    if runtime:
        pod_spec["runtimeClassName"] = runtime
    annotations = {**dict(cfg.worker_annotations), **shape.annotations}
    if annotations:
        meta = pod["metadata"]
        meta["annotations"] = {**annotations, **(meta.get("annotations") or {})}
    container = pod_spec["containers"][0]
    container["env"] = [*container["env"], *worker_env(cfg, spec)]
    if shape.shm_size:
        volume = {
            "name": SHM_VOLUME,
            "emptyDir": {"medium": "Memory", "sizeLimit": shape.shm_size},
        }
        pod_spec["volumes"] = [*(pod_spec.get("volumes") or []), volume]
        mount = {"name": SHM_VOLUME, "mountPath": "/dev/shm"}
        container["volumeMounts"] = [*(container.get("volumeMounts") or []), mount]
