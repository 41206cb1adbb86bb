"""Kubernetes discovery, the pure part: which worker pods are backends, at which URL.

The operator labels every worker pod it creates with the component and the
ModelDeployment's name, so the gateway lists exactly those (``worker_selector``) and
turns each usable pod into ``http://<pod IP>:<WORKER_PORT>``. A pod is usable when it
runs, has an IP and is not being deleted; whether it can take requests (weights loaded,
or part of an execute-while-load pipeline) is for its ``/v1/load`` report to say, so
not-yet-ready pods are listed too and polled. The API calls live in
:mod:`cascade_gateway.kube`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cascade_api.constants import COMPONENT_WORKER, LABEL_COMPONENT, LABEL_DEPLOYMENT, WORKER_PORT


@dataclass(frozen=True)
class PodView:
    """The few fields of a Pod that decide whether it is a backend."""

    name: str
    phase: str  # status.phase
    pod_ip: str  # status.podIP ("" before the pod has one)
    deleting: bool = False  # metadata.deletionTimestamp is set


def worker_selector(deployment: str) -> str:
    return f"{LABEL_COMPONENT}={COMPONENT_WORKER},{LABEL_DEPLOYMENT}={deployment}"


def pod_url(pod_ip: str, port: int = WORKER_PORT) -> str:
    host = f"[{pod_ip}]" if ":" in pod_ip else pod_ip  # IPv6 literals need brackets
    return f"http://{host}:{port}"


def backends_from_pods(pods: Iterable[PodView], port: int = WORKER_PORT) -> list[str]:
    """Backend URLs of the usable pods, sorted and without duplicates."""
    return sorted(
        {
            pod_url(p.pod_ip, port)
            for p in pods
            if p.phase == "Running" and p.pod_ip and not p.deleting
        }
    )
