"""Kubernetes discovery, the pure part: which worker pods are backends, at which URL.

The operator labels every worker pod it creates with the component and the
ModelDeployment's name, so the gateway lists exactly those (``worker_selector``) and
turns each usable pod into ``http://<pod IP>:<WORKER_PORT>``. A pod is usable when it
runs, has an IP and is not being deleted; whether it can take requests (weights loaded,
or part of an execute-while-load pipeline) is for its ``/v1/load`` report to say, so
not-yet-ready pods are listed too and polled. Each backend carries its pod's name and
role (the autoscaler's ``cascade.dev/role`` label; none or an unknown value is mixed),
read again at every listing, so a relabelled pod changes role at the next one. The API
calls live in :mod:`cascade_gateway.kube`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cascade_api.constants import (
    COMPONENT_WORKER,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_ROLE,
    WORKER_PORT,
)
from cascade_protocol.roles import InstanceRole


@dataclass(frozen=True)
class PodView:
    """The few fields of a Pod that decide whether it is a backend, and which kind."""

    name: str
    phase: str  # status.phase
    pod_ip: str  # status.podIP ("" before the pod has one)
    deleting: bool = False  # metadata.deletionTimestamp is set
    role: InstanceRole = InstanceRole.MIXED  # from the role label


@dataclass(frozen=True)
class Discovered:
    """One backend found by discovery."""

    url: str
    pod: str
    role: InstanceRole = InstanceRole.MIXED


def worker_selector(deployment: str) -> str:
    return f"{LABEL_COMPONENT}={COMPONENT_WORKER},{LABEL_DEPLOYMENT}={deployment}"


def role_of(labels: Mapping[str, str] | None) -> InstanceRole:
    """A pod's role from its labels: the role label's value, mixed without one."""
    return InstanceRole.of_label((labels or {}).get(LABEL_ROLE))


def pod_url(pod_ip: str, port: int = WORKER_PORT) -> str:
    host = f"[{pod_ip}]" if ":" in pod_ip else pod_ip  # IPv6 literals need brackets
    return f"http://{host}:{port}"


def backends_from_pods(pods: Iterable[PodView], port: int = WORKER_PORT) -> list[Discovered]:
    """The usable pods as backends, sorted by URL; one per URL (the first pod by name)."""
    found: dict[str, Discovered] = {}
    for p in sorted(pods, key=lambda p: p.name):
        if p.phase == "Running" and p.pod_ip and not p.deleting:
            url = pod_url(p.pod_ip, port)
            found.setdefault(url, Discovered(url, p.name, p.role))
    return [found[url] for url in sorted(found)]
