"""Kubernetes discovery, the I/O part: list the deployment's worker pods every few seconds.

Uses the official client with the pod's service account (in-cluster config), falling
back to $KUBECONFIG for a gateway run outside the cluster (``cascade dev``, debugging).
The client is synchronous, so each listing runs in a thread; a failed listing keeps the
last known backends (a blip in the API server must not empty the pool). The pure
mapping from pods to backends (URL, pod name, role label) is
:mod:`cascade_gateway.discovery`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from cascade_gateway.backends import BackendPool
from cascade_gateway.discovery import (
    Discovered,
    PodView,
    backends_from_pods,
    role_of,
    worker_selector,
)

log = logging.getLogger(__name__)


def core_api() -> Any:
    from kubernetes import client, config  # imported here: only this mode needs it

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.CoreV1Api()


def pod_view(pod: Any) -> PodView:
    return PodView(
        name=pod.metadata.name,
        phase=(pod.status.phase or "") if pod.status else "",
        pod_ip=(pod.status.pod_ip or "") if pod.status else "",
        deleting=pod.metadata.deletion_timestamp is not None,
        role=role_of(pod.metadata.labels),
    )


def list_backends(api: Any, namespace: str, deployment: str) -> list[Discovered]:
    pods = api.list_namespaced_pod(namespace, label_selector=worker_selector(deployment))
    return backends_from_pods(pod_view(p) for p in pods.items)


async def discovery_loop(
    pool: BackendPool, namespace: str, deployment: str, interval: float
) -> None:
    """Replace the pool's discovered backends with each listing, until cancelled."""
    api: Any = None
    failing = False
    while True:
        try:
            if api is None:
                api = await asyncio.to_thread(core_api)
            found = await asyncio.to_thread(list_backends, api, namespace, deployment)
        except Exception as exc:  # the API server may blip; keep the last known set
            if not failing:
                log.warning("listing worker pods in %s failed: %s", namespace, exc)
            failing = True
        else:
            if failing:
                log.info("listing worker pods in %s works again", namespace)
            failing = False
            pool.set_discovered(found)
        await asyncio.sleep(interval)
