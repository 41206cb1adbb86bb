"""Glue between kopf handlers and the pure decision: observe, decide, act.

One reconcile at a time per ModelDeployment (a lock per object), because pod, gateway
and ModelDeployment watch events for the same object can arrive together.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict

from cascade_api import constants as c
from cascade_api.base import utcnow
from cascade_api.modeldeployment import ModelDeploymentStatus
from cascade_operator import builders
from cascade_operator.clients import Body, Cluster
from cascade_operator.config import OperatorConfig
from cascade_operator.reconcile import decide
from cascade_operator.view import GatewayView, MdRef, Observed, PodView

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, cluster: Cluster, cfg: OperatorConfig) -> None:
        self.cluster = cluster
        self.cfg = cfg
        self._locks: defaultdict[tuple[str, str], threading.Lock] = defaultdict(threading.Lock)
        self._guard = threading.Lock()

    def _lock(self, namespace: str, name: str) -> threading.Lock:
        with self._guard:
            return self._locks[(namespace, name)]

    def reconcile(self, namespace: str, name: str) -> None:
        with self._lock(namespace, name):
            body = self.cluster.get_md(namespace, name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return
            self._reconcile(body)

    def _observe(self, body: Body) -> Observed:
        ref = MdRef.of(body)
        selector = builders.worker_selector(ref.name)
        pods = [PodView.of(p) for p in self.cluster.list_pods(ref.namespace, selector)]
        deployment, service = self.cluster.get_gateway(
            ref.namespace, builders.gateway_name(ref.name)
        )
        return Observed(
            ref=ref,
            generation=int(body["metadata"].get("generation", 0)),
            spec=body.get("spec") or {},
            status=body.get("status") or {},
            pods=pods,
            gateway=GatewayView.of(deployment, service),
        )

    def _reconcile(self, body: Body) -> None:
        obs = self._observe(body)
        decision = decide(obs, self.cfg, utcnow())
        ns = obs.ref.namespace
        for manifest in decision.create_pods:
            self.cluster.create_pod(manifest)
        for pod in decision.delete_pods:
            self.cluster.delete_pod(ns, pod)
        for manifest in decision.gateway:
            self.cluster.apply(manifest)
        current = ModelDeploymentStatus.model_validate(obs.status).to_api()
        if decision.status != current:
            self.cluster.patch_md_status(ns, obs.ref.name, decision.status)
        for note in decision.events:
            self.cluster.emit_event(body, note)
        if decision.create_pods or decision.delete_pods:
            log.info(
                "%s/%s: created %d, deleted %d pods",
                ns,
                obs.ref.name,
                len(decision.create_pods),
                len(decision.delete_pods),
            )

    def cleanup(self, namespace: str, name: str) -> int:
        """Delete what the ModelDeployment owns; returns how many pods remain terminating."""
        with self._lock(namespace, name):
            return self.cluster.delete_owned(namespace, name)


def owner_of(labels: dict[str, str]) -> str | None:
    """The ModelDeployment a managed object belongs to, from its labels."""
    if labels.get(c.LABEL_MANAGED_BY) != c.MANAGED_BY:
        return None
    return labels.get(c.LABEL_DEPLOYMENT)
