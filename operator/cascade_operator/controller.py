"""Glue between kopf handlers and the pure decisions: observe, decide, act.

One reconcile at a time per ModelDeployment (a lock per object), because pod, gateway,
ScalePlan and ModelDeployment watch events for the same object can arrive together.

A reconcile is two deciders over one observation: `reconcile.decide` (pods, gateway,
status) and the weight-moving lifecycle (plandriver: pool, ScalePlans, worker orders).
The pool goes first so scale-down spares host-copy holders; the lifecycle's Planned
condition and currentPlan are merged into the status reconcile built, so one status
write carries both and no transition is announced twice.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from dataclasses import replace

from cascade_api import constants as c
from cascade_api.base import utcnow
from cascade_api.modeldeployment import ModelDeploymentStatus
from cascade_operator import builders
from cascade_operator.clients import Body, Cluster
from cascade_operator.config import OperatorConfig
from cascade_operator.lifecycle import merge_plan_status
from cascade_operator.plandriver import PlanDriver
from cascade_operator.reconcile import decide, parse_spec
from cascade_operator.view import GatewayView, MdRef, Observed, PodView
from cascade_operator.workerclient import WorkerClient

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, cluster: Cluster, cfg: OperatorConfig) -> None:
        self.cluster = cluster
        self.cfg = cfg
        self._locks: defaultdict[tuple[str, str], threading.Lock] = defaultdict(threading.Lock)
        self._guard = threading.Lock()
        self.plans = PlanDriver(cluster, WorkerClient())
        # Deployments whose weights are moving: the fast timer reconciles these.
        self._moving: set[tuple[str, str]] = set()

    def moving(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self._moving

    def _lock(self, namespace: str, name: str) -> threading.Lock:
        with self._guard:
            return self._locks[(namespace, name)]

    def reconcile(self, namespace: str, name: str) -> None:
        with self._lock(namespace, name):
            body = self.cluster.get_md(namespace, name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return
            self._reconcile(body)

    def _observe(self, body: Body, raw_pods: list[Body]) -> Observed:
        ref = MdRef.of(body)
        pods = [PodView.of(p) for p in raw_pods]
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
        ref = MdRef.of(body)
        raw_pods = self.cluster.list_pods(ref.namespace, builders.worker_selector(ref.name))
        obs = self._observe(body, raw_pods)
        spec, problems = parse_spec(obs.spec)
        accepted = spec if spec is not None and not problems else None
        got = None
        if accepted is not None:
            got = self.plans.gather(ref, raw_pods, accepted.host_copies)
            obs = replace(obs, protected=frozenset(got.pool.protected()))
        now = utcnow()
        decision = decide(obs, self.cfg, now)
        ns = obs.ref.namespace
        for manifest in decision.create_pods:
            self.cluster.create_pod(manifest)
        for pod in decision.delete_pods:
            self.cluster.delete_pod(ns, pod)
        for manifest in decision.gateway:
            self.cluster.apply(manifest)
        status, events = decision.status, list(decision.events)
        if accepted is not None and got is not None:
            outcome = self.plans.tick(body, ref, accepted, got, now)
            status = merge_plan_status(status, obs.status or {}, outcome.decision, now)
            events += outcome.events
            if outcome.moving:
                self._moving.add((ns, ref.name))
            else:
                self._moving.discard((ns, ref.name))
        else:
            self._moving.discard((ns, ref.name))
        current = ModelDeploymentStatus.model_validate(obs.status).to_api()
        if status != current:
            self.cluster.patch_md_status(ns, obs.ref.name, status)
        for note in events:
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
