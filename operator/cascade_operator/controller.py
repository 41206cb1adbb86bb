"""Glue between kopf handlers and the pure decisions: observe, decide, act.

One reconcile at a time per ModelDeployment, because pod, gateway, ScalePlan and
ModelDeployment watch events for the same object can arrive together; a call that finds
another one waiting leaves the work to it (serial.py).

A reconcile is observe -> decide -> act: `observer.Observer` reads once and runs the two
deciders that keep memory (the weights lifecycle, the autoscaler); `reconcile.decide`,
pure, turns that into the writes and the status; `act.Acts` makes the calls, keeping a
refused one instead of raising it (refusals.py: retried within seconds, or `Degraded`),
and the status goes out last, once, telling each condition transition once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import partial

from cascade_api import constants as c
from cascade_api.base import utcnow
from cascade_api.scaling import AutoscalerOwner
from cascade_operator.act import Acts
from cascade_operator.autoscale.tick import Autoscaler
from cascade_operator.clients.kube import Body, Cluster, KubeRefusal
from cascade_operator.clients.workers import WorkerClient
from cascade_operator.config import OperatorConfig
from cascade_operator.inference_pool import keep_pool
from cascade_operator.metrics import OperatorMetrics
from cascade_operator.observed import MdRef, PodView
from cascade_operator.observer import Observer
from cascade_operator.reconcile import decide
from cascade_operator.refusals import Refusal, Retries, degraded_message
from cascade_operator.serial import Serial
from cascade_operator.spec import parse_spec
from cascade_operator.weights.driver import PlanDriver
from cascade_protocol.status import ServingMode

log = logging.getLogger(__name__)


class Controller:
    def __init__(
        self,
        cluster: Cluster,
        cfg: OperatorConfig,
        workers: WorkerClient | None = None,
        autoscaler: Autoscaler | None = None,
        metrics: OperatorMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.cfg = cfg
        self.metrics = metrics or OperatorMetrics()
        self._serial = Serial()
        self.plans = PlanDriver(cluster, workers or WorkerClient())
        self.autoscaler = autoscaler or Autoscaler(cluster)
        self.observer = Observer(cluster, cfg, self.plans, self.autoscaler, self.metrics)
        # Deployments whose weights are moving: the fast timer reconciles these.
        self._moving: set[tuple[str, str]] = set()
        # IPs of running pods whose worker did not answer yet (handlers.poll_starting).
        self._starting: dict[tuple[str, str], list[str]] = {}
        self.retries, self._clock = Retries(), clock  # writes the API server refused

    def due(self, namespace: str, name: str) -> bool:
        """The fast timer's question: weights are moving, or a refused write's retry is
        due (refusals.py: kopf would not retry an event handler's error)."""
        key = (namespace, name)
        return key in self._moving or self.retries.due(key, self._clock())

    def answering(self, namespace: str, name: str) -> bool:
        """A pod whose worker did not answer at the last reconcile answers now: a plan
        can start for it (probed only while such pods exist)."""
        ips = self._starting.get((namespace, name))
        return bool(ips) and self.plans.http.answering(ips or [])

    def reconcile(self, namespace: str, name: str, *, autoscale: bool = False) -> None:
        """Converge one deployment; `autoscale`: this is an autoscaler tick (never
        coalesced into a waiting reconcile: the tick is what it adds)."""
        work = partial(self._run, namespace, name, autoscale)
        self._serial.run((namespace, name), work, coalesce=not autoscale)

    def _run(self, namespace: str, name: str, autoscale: bool) -> None:
        body = self.cluster.get_md(namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return
        began, failed = time.monotonic(), True
        try:
            self._reconcile(body, autoscale)
            failed = False
        except KubeRefusal as err:  # a read or the status write: the whole tick again
            refusal = Refusal("reconcile", err.status, err.message)
            if not refusal.retryable:
                raise
            self.retries.ended((namespace, name), [refusal], self._clock())
            log.warning("%s/%s: %s; retrying", namespace, name, refusal.describe())
        finally:
            seconds = time.monotonic() - began
            self.metrics.reconciled(MdRef.of(body), seconds, failed=failed)

    def autoscale(self, namespace: str, name: str, spec: Body) -> None:
        """The autoscaler's timer: a tick for deployments whose replicas Cascade owns."""
        parsed = parse_spec(spec, self.cfg.model_roots).accepted
        if parsed is not None and parsed.scaling.owner == AutoscalerOwner.CASCADE:
            self.reconcile(namespace, name, autoscale=True)

    def _reconcile(self, body: Body, autoscale: bool = False) -> None:
        ref, key = MdRef.of(body), (body["metadata"]["namespace"], body["metadata"]["name"])
        parsed = parse_spec(body.get("spec") or {}, self.cfg.model_roots)
        obs = self.observer.observe(body, parsed, autoscale)
        (self._moving.add if obs.follow else self._moving.discard)(key)
        actions = decide(obs, parsed, self.cfg)
        acts = Acts(self.cluster, ref)
        acts.run(actions)
        attempts = self.retries.ended(key, acts.refused, self._clock())
        update = actions.status_update(utcnow(), degraded_message(acts.refused, attempts))
        modes, started = actions.status.modes, actions.status.startups
        self._inference_pool(body, obs.pods, modes)
        self._starting[key] = [w.ip for w in obs.workers if w.alive and not w.phase and w.ip]
        self.metrics.observed(ref, obs.pods, modes, started)
        patch = update.patch(actions.status.previous)
        if patch is not None:
            self.cluster.patch_md_status(ref.namespace, ref.name, patch)
        for note in [*actions.events, *update.events]:
            self.cluster.emit_event(body, note)
        if actions.create_pods or actions.delete_pods:
            made, deleted = len(actions.create_pods), len(actions.delete_pods)
            log.info("%s: created %d, deleted %d pods", ref, made, deleted)

    def _inference_pool(
        self, body: Body, pods: list[PodView], modes: Mapping[str, ServingMode]
    ) -> None:
        """Keep the deployment's InferencePool where its CRD is served (inference_pool.py)."""
        pools = self.cluster.pools
        if pools.served():
            pools.act(keep_pool(body, pods, modes, pools.observe(MdRef.of(body))))

    def cleanup(self, namespace: str, name: str) -> int:
        """Delete what the ModelDeployment owns; returns how many pods remain terminating."""
        with self._serial.lock((namespace, name)):
            self.metrics.forget(namespace, name)
            self._starting.pop((namespace, name), None)
            self.retries.forget((namespace, name))
            return self.cluster.delete_owned(namespace, name)


def owner_of(labels: dict[str, str]) -> str | None:
    """The ModelDeployment a managed object belongs to, from its labels."""
    if labels.get(c.LABEL_MANAGED_BY) != c.MANAGED_BY:
        return None
    return labels.get(c.LABEL_DEPLOYMENT)
