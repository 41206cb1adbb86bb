"""Node and Lease manifests for the simulated GPU nodes (pure builders).

The scheduler and the operator's planner read topology from node labels (zone, leaf
switch, NVLink clique, NIC rates), and the scheduler places GPU pods by the extended
resources in allocatable. The node lifecycle controller keeps a node Ready only while
its Lease in kube-node-lease is renewed (every 10 s here) and its Ready condition is
posted; the heartbeat loop uses these builders for both.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cascade_api import constants as c
from cascade_dev.cpuquota import LABEL_NODE_CPU, format_cores, parse_cores

from .timeutil import micro_time, rfc3339

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_OS = "kubernetes.io/os"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_GPU_COUNT = "nvidia.com/gpu.count"
LABEL_SIMULATED = f"{c.GROUP}/simulated"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"

NODE_CPU = "32"
NODE_MEMORY = "256Gi"
NODE_EPHEMERAL_STORAGE = "1Ti"
MAX_PODS = "110"
KUBELET_VERSION = "v1.20.2-cascade"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_S = 40

# Condition type -> (status, reason, message) the agent always reports.
_CONDITIONS: dict[str, tuple[str, str, str]] = {
    "MemoryPressure": (
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    "Ready": ("True", "KubeletReady", "cascade node agent is posting ready status"),
}


@dataclass(frozen=True)
class NodeSpec:
    """One simulated node as described by cluster.json."""

    name: str
    index: int
    zone: str
    leaf: str
    nvlink_clique: str
    gpus: int
    nic_in_mbit: int
    nic_out_mbit: int
    cpu: float | None = None  # CPU quota of the node's pods in cores; None: unlimited
    # Labels cluster.json asks for beyond ours (ours win on conflict).
    extra_labels: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> NodeSpec:
        return cls(
            name=str(d["name"]),
            index=int(d.get("index", 0)),
            zone=str(d.get("zone", "zone-a")),
            leaf=str(d.get("leaf", "leaf-0")),
            nvlink_clique=str(d.get("nvlink_clique", d.get("name"))),
            gpus=int(d.get("gpus", 8)),
            nic_in_mbit=int(d.get("nic_in_mbit", 0)),
            nic_out_mbit=int(d.get("nic_out_mbit", 0)),
            cpu=parse_cores(d.get("cpu")),
            extra_labels=tuple(
                sorted((str(k), str(v)) for k, v in (d.get("labels") or {}).items())
            ),
        )


def load_nodes(cluster: Mapping[str, Any]) -> list[NodeSpec]:
    """The nodes of a parsed cluster.json, in index order."""
    nodes = [NodeSpec.from_json(n) for n in cluster.get("nodes", [])]
    return sorted(nodes, key=lambda n: (n.index, n.name))


def node_labels(spec: NodeSpec) -> dict[str, str]:
    quota = {LABEL_NODE_CPU: format_cores(spec.cpu)} if spec.cpu is not None else {}
    return (
        dict(spec.extra_labels)
        | quota
        | {
            LABEL_HOSTNAME: spec.name,
            LABEL_OS: "linux",
            LABEL_ARCH: "amd64",
            c.LABEL_ZONE: spec.zone,
            c.LABEL_GPU_PRODUCT: GPU_PRODUCT,
            LABEL_GPU_COUNT: str(spec.gpus),
            c.LABEL_NVLINK_CLIQUE: spec.nvlink_clique,
            c.LABEL_LEAF: spec.leaf,
            c.LABEL_NIC_IN_MBIT: str(spec.nic_in_mbit),
            c.LABEL_NIC_OUT_MBIT: str(spec.nic_out_mbit),
            LABEL_SIMULATED: "true",
        }
    )


def node_capacity(spec: NodeSpec) -> dict[str, str]:
    return {
        "cpu": NODE_CPU,
        "memory": NODE_MEMORY,
        "ephemeral-storage": NODE_EPHEMERAL_STORAGE,
        "pods": MAX_PODS,
        c.GPU_RESOURCE: str(spec.gpus),
        c.RDMA_RESOURCE: str(spec.gpus),
    }


def node_conditions(now: datetime, prev: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """Conditions with a fresh heartbeat; lastTransitionTime kept while status is unchanged."""
    by_type = {str(p.get("type")): p for p in prev}
    out: list[dict[str, Any]] = []
    for ctype, (status, reason, message) in _CONDITIONS.items():
        old = by_type.get(ctype)
        ltt = old.get("lastTransitionTime") if old and old.get("status") == status else None
        out.append(
            {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": rfc3339(now),
                "lastTransitionTime": ltt or rfc3339(now),
            }
        )
    return out


def _stable_id(name: str, what: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{what}.{name}.cascade.dev"))


def node_status(
    spec: NodeSpec,
    ip: str,
    now: datetime,
    prev_conditions: Sequence[Mapping[str, Any]] = (),
    kernel: str = "",
) -> dict[str, Any]:
    cap = node_capacity(spec)
    return {
        "capacity": cap,
        "allocatable": dict(cap),
        "conditions": node_conditions(now, prev_conditions),
        "addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": spec.name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": _stable_id(spec.name, "machine").replace("-", ""),
            "systemUUID": _stable_id(spec.name, "system"),
            "bootID": _stable_id(spec.name, "boot"),
            "kernelVersion": kernel,
            "osImage": "Cascade simulated GPU node",
            "containerRuntimeVersion": "cascade://0.1.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def node_manifest(spec: NodeSpec, ip: str, now: datetime, kernel: str = "") -> dict[str, Any]:
    """A full Node for create (the API keeps status on create for nodes)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": node_labels(spec),
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": node_status(spec, ip, now, kernel=kernel),
    }


def node_metadata_patch(spec: NodeSpec) -> dict[str, Any]:
    """Merge patch that re-asserts our labels on an existing node (others are kept); the
    CPU quota label goes when the node has no quota any more (`up` without --node-cpu)."""
    labels: dict[str, str | None] = {LABEL_NODE_CPU: None}
    return {"metadata": {"labels": labels | node_labels(spec)}}


def lease_manifest(node_name: str, node_uid: str | None, now: datetime) -> dict[str, Any]:
    """The node's heartbeat Lease; owned by the Node so it is collected with it."""
    meta: dict[str, Any] = {"name": node_name, "namespace": LEASE_NAMESPACE}
    if node_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}
        ]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {
            "holderIdentity": node_name,
            "leaseDurationSeconds": LEASE_DURATION_S,
            "renewTime": micro_time(now),
        },
    }
