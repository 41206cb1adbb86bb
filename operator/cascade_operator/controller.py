"""Glue between kopf handlers and the pure decisions: observe, decide, act.

One reconcile at a time per ModelDeployment, because pod, gateway, ScalePlan and
ModelDeployment watch events for the same object can arrive together; a call that finds
another one waiting leaves the work to it (serial.py).

A reconcile reads everything once (the spec parsed once, each pod parsed once, each
worker's status asked once), then runs the deciders: first the weights half
(`weights.driver`: pool, ScalePlans, worker orders: a target's orders wait for nothing
else), then on the autoscaler's timer the Cascade autoscaler (`autoscale.tick`),
`instances.decide` (pods, gateway), the NetworkPolicies, the host copies and the
profile Job (`materialization`). Their writes go through `act.Acts`, which keeps a
refused call instead of raising it (refusals.py: retried within seconds, or `Degraded`).
All hand their facts to `status.assemble`, which writes one status and tells each
condition transition once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import partial

from cascade_api import constants as c
from cascade_api.base import utcnow
from cascade_api.modeldeployment import (
    HostCopyStatus,
    ModelDeploymentSpec,
    ModelDeploymentStatus,
)
from cascade_api.scaling import AutoscalerOwner
from cascade_operator import builders, instances
from cascade_operator.act import Acts
from cascade_operator.autoscale import observe
from cascade_operator.autoscale.tick import Autoscaler
from cascade_operator.clients.kube import Body, Cluster, KubeRefusal
from cascade_operator.clients.workers import WorkerClient
from cascade_operator.config import OperatorConfig
from cascade_operator.host_copies import HostCopyDecision, decide_host_copies, host_copy_selector
from cascade_operator.inference_pool import keep_pool
from cascade_operator.metrics import OperatorMetrics
from cascade_operator.node_loss import LOST_AFTER_S, lost_event, lost_nodes, on_lost_nodes
from cascade_operator.observed import GatewayView, MdRef, Observed, PodView
from cascade_operator.peer_secret import peer_secret, token_of
from cascade_operator.refusals import Refusal, Retries, degraded_message
from cascade_operator.serial import Serial
from cascade_operator.spec import parse_spec
from cascade_operator.status import PlanState, StatusInput, assemble
from cascade_operator.weights.calibration import HopLatency, planning_with
from cascade_operator.weights.driver import PlanDriver
from cascade_operator.weights.workers import job_failures
from cascade_protocol.peer_auth import secret_name
from cascade_protocol.status import ServingMode

log = logging.getLogger(__name__)
NODES_TTL_S = 2.0


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
        self.hops = HopLatency.configured(
            cfg.hop_latency_s, cfg.step_latency_s, cfg.learn_hop_latency
        )
        self.autoscaler = autoscaler or Autoscaler(cluster)
        self._nodes: list[Body] = []
        self._nodes_read = -NODES_TTL_S
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
        ref = MdRef.of(body)
        ns, generation = ref.namespace, int(body["metadata"].get("generation", 0))
        stored: Body = body.get("status") or {}
        previous = ModelDeploymentStatus.model_validate(stored)
        parsed = parse_spec(body.get("spec") or {}, self.cfg.model_roots)
        spec = parsed.accepted
        pods = self._pods(ns, builders.worker_selector(ref.name))
        hosts = self._pods(ns, host_copy_selector(ref.name))
        lost = on_lost_nodes(pods + hosts, self._lost_nodes())
        # A pod on a node that stopped reporting: follow it every second until it is lost.
        suspect = bool(on_lost_nodes(pods + hosts, self._lost_nodes(after_s=0.0)))
        for gone in lost:  # its kubelet is gone: take it back now, replace it below
            self.cluster.delete_pod(ns, gone.name, force=True)
        pods, hosts = [p for p in pods if p not in lost], [p for p in hosts if p not in lost]
        self._authorize(ref, pods + hosts)
        workers = self.plans.workers(pods + hosts)
        now = utcnow()
        plans, moving, plan_events = None, False, []
        if spec is not None:  # weights first: a target's orders wait for nothing else here
            got = self.plans.gather(ref, pods + hosts, workers, spec.host_copies, self._nodes)
            with planning_with(self.hops.costs()):  # the learned start costs
                outcome = self.plans.tick(ref, generation, spec, got, now)
            self.metrics.plans_ended(ref, outcome.ended)
            self.hops.observe(e.hop for e in outcome.ended)
            plans = PlanState(outcome.decision.condition, outcome.decision.current_plan)
            moving, plan_events = outcome.moving, outcome.events
        deployment, service = self.cluster.get_gateway(ns, builders.gateway_name(ref.name))
        scaling, scale_events = None, []
        if spec is not None:
            facts = (
                self.autoscaler.tick(ref, spec, pods, generation)
                if autoscale
                else self.autoscaler.last(ref, spec, generation)
            )
            if facts.replicas is not None:  # written: this reconcile creates the pods
                spec = spec.model_copy(update={"replicas": facts.replicas})
            scaling, scale_events = facts.shown, facts.events
            if facts.recommendation is not None:
                self.metrics.autoscaled(ref, facts.recommendation)
        obs = Observed(
            ref=ref,
            generation=generation,
            status=stored,
            pods=pods,
            gateway=GatewayView.of(deployment, service),
            in_flight=self._in_flight(ref, spec, pods),
        )
        decision = instances.decide(obs, spec, self.cfg, has_copy=_alive(hosts))
        copies = decide_host_copies(ref, spec, hosts, self.cfg) if spec else HostCopyDecision()
        acts = Acts(self.cluster, ref)
        profile = acts.profile_job(spec, self.cfg)
        acts.pods([*decision.create_pods, *copies.create], [*decision.delete_pods, *copies.delete])
        acts.apply(decision.gateway)
        acts.network_policies(self.cfg)
        attempts = self.retries.ended((ns, ref.name), acts.refused, self._clock())
        modes = {w.name: w.mode for w in workers if w.mode is not None}
        self._inference_pool(body, pods, modes)
        events = [*scale_events, *decision.events, *copies.events, *profile.events]
        events += [lost_event(lost)] if lost else []
        events += plan_events
        (self._moving.add if moving or suspect else self._moving.discard)((ns, ref.name))
        self._starting[(ns, ref.name)] = [w.ip for w in workers if w.alive and not w.phase and w.ip]
        startups = {w.name: w.startup for w in workers if w.startup is not None}
        self.metrics.observed(ref, pods, modes, startups)
        update = assemble(
            StatusInput(
                previous=previous,
                generation=generation,
                parsed=parsed,
                pods=pods,
                gateway=obs.gateway,
                selector=builders.worker_selector(ref.name),
                endpoint=builders.gateway_endpoint(ref),
                blocks={w.name: w.blocks_loaded for w in workers if w.phase is not None},
                modes=modes,
                failures=job_failures(workers, spec.model.uri if spec is not None else None),
                startups=startups,
                materializations={
                    w.name: w.materialization for w in workers if w.materialization is not None
                },
                materialization=profile.shown if spec is not None else None,
                host_copies=[
                    HostCopyStatus(
                        pod=w.name, node=w.node, ready=w.has_model, bytes_held=w.store_bytes
                    )
                    for w in workers
                    if w.host_copy
                ],
                plans=plans,
                scaling=scaling,
                refused=degraded_message(acts.refused, attempts),
            ),
            now,
        )
        patch = update.patch(previous)
        if patch is not None:
            self.cluster.patch_md_status(ns, ref.name, patch)
        for note in [*events, *update.events]:
            self.cluster.emit_event(body, note)
        if decision.create_pods or decision.delete_pods:
            created, deleted = len(decision.create_pods), len(decision.delete_pods)
            log.info("%s/%s: created %d, deleted %d pods", ns, ref.name, created, deleted)

    def _inference_pool(
        self, body: Body, pods: list[PodView], modes: Mapping[str, ServingMode]
    ) -> None:
        """Keep the deployment's InferencePool where its CRD is served (inference_pool.py)."""
        pools = self.cluster.pools
        if pools.served():
            pools.act(keep_pool(body, pods, modes, pools.observe(MdRef.of(body))))

    def _authorize(self, ref: MdRef, pods: list[PodView]) -> None:
        """Keep the deployment's peer-token Secret (made once) and have the worker client
        present the token to its pods (cascade_protocol.peer_auth)."""
        token = token_of(self.cluster.ensure_secret(peer_secret(ref)))
        if token is None:
            log.warning("%s: Secret %s holds no token", ref, secret_name(ref.name))
            return
        self.plans.http.authorize([p.ip for p in pods], token)

    def _lost_nodes(self, after_s: float = LOST_AFTER_S) -> set[str]:
        """Nodes lost to their kubelet (node_loss.py); the list is read at most every
        NODES_TTL_S, not once per deployment's reconcile."""
        now = time.monotonic()
        if now - self._nodes_read >= NODES_TTL_S:
            self._nodes, self._nodes_read = self.cluster.list_nodes(), now
        return lost_nodes(self._nodes, utcnow(), after_s)

    def _pods(self, ns: str, selector: str) -> list[PodView]:
        return [PodView.of(p) for p in self.cluster.list_pods(ns, selector) if p.get("metadata")]

    def _in_flight(
        self, ref: MdRef, spec: ModelDeploymentSpec | None, pods: list[PodView]
    ) -> dict[str, int]:
        """Per-pod load for choosing scale-down victims; asked only when shrinking."""
        if spec is None or spec.replicas >= len(observe.alive(pods)):
            return {}
        return self.autoscaler.in_flight(ref)

    def cleanup(self, namespace: str, name: str) -> int:
        """Delete what the ModelDeployment owns; returns how many pods remain terminating."""
        with self._serial.lock((namespace, name)):
            self.metrics.forget(namespace, name)
            self._starting.pop((namespace, name), None)
            self.retries.forget((namespace, name))
            return self.cluster.delete_owned(namespace, name)


def _alive(pods: list[PodView]) -> bool:
    return any(not p.terminating and not p.failed for p in pods)


def owner_of(labels: dict[str, str]) -> str | None:
    """The ModelDeployment a managed object belongs to, from its labels."""
    if labels.get(c.LABEL_MANAGED_BY) != c.MANAGED_BY:
        return None
    return labels.get(c.LABEL_DEPLOYMENT)
