"""What one reconcile reads, and the two deciders with memory it runs while reading.

Everything is read once: the spec parsed once, each pod parsed once, each worker asked
once. The weights lifecycle (`weights.driver`: pool, ScalePlans, worker orders) runs
first, since a target's orders wait for nothing else; then the autoscaler, a tick on its
own timer (`autoscale.tick`) or its last facts between ticks. What they decided goes
into the `Observation` that `reconcile.decide` turns into the rest of the writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from cascade_api.base import utcnow
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import builders
from cascade_operator.autoscale import observe
from cascade_operator.autoscale.tick import Autoscaler
from cascade_operator.clients.kube import Body, Cluster
from cascade_operator.config import OperatorConfig
from cascade_operator.host_copies import host_copy_selector
from cascade_operator.materialization import JobView, job_selector
from cascade_operator.metrics import OperatorMetrics
from cascade_operator.network_policies import policy_selector
from cascade_operator.node_loss import LOST_AFTER_S, disrupted, lost_nodes, on_lost_nodes
from cascade_operator.observed import GatewayView, MdRef, PodView
from cascade_operator.peer_secret import peer_secret, token_of
from cascade_operator.reconcile import Observation
from cascade_operator.spec import ParsedSpec
from cascade_operator.status import PlanState
from cascade_operator.weights.calibration import HopLatency, planning_with
from cascade_operator.weights.driver import PlanDriver
from cascade_protocol.peer_auth import secret_name

log = logging.getLogger(__name__)
NODES_TTL_S = 2.0


class Observer:
    """The reads of every reconcile, and the memory kept between them (the weights
    lifecycle's, the autoscaler's, the learned hop costs, the node list's cache)."""

    def __init__(
        self,
        cluster: Cluster,
        cfg: OperatorConfig,
        plans: PlanDriver,
        autoscaler: Autoscaler,
        metrics: OperatorMetrics,
    ) -> None:
        self.cluster, self.plans, self.autoscaler, self.metrics = (
            cluster,
            plans,
            autoscaler,
            metrics,
        )
        self.hops = HopLatency.configured(
            cfg.hop_latency_s, cfg.step_latency_s, cfg.learn_hop_latency
        )
        self._nodes: list[Body] = []
        self._nodes_read = -NODES_TTL_S
        self._calm_since: datetime | None = None  # the last disruption seen (node_loss.py)

    def observe(self, body: Body, parsed: ParsedSpec, autoscale: bool) -> Observation:
        """Read once, then run the deciders that keep memory and talk to workers and
        gateways: the weights lifecycle (a target's orders wait for nothing else), then
        the autoscaler (a tick on its timer, its last facts between ticks)."""
        ref, spec = MdRef.of(body), parsed.accepted
        generation = int(body["metadata"].get("generation", 0))
        pods = self._pods(ref.namespace, builders.worker_selector(ref.name))
        hosts = self._pods(ref.namespace, host_copy_selector(ref.name))
        lost = on_lost_nodes(pods + hosts, self._lost_nodes())
        # A pod on a node that stopped reporting: follow it every second until it is lost.
        suspect = bool(on_lost_nodes(pods + hosts, self._lost_nodes(after_s=0.0)))
        pods, hosts = [p for p in pods if p not in lost], [p for p in hosts if p not in lost]
        self._authorize(ref, pods + hosts)
        workers = self.plans.workers(pods + hosts)
        obs = Observation(ref, generation, body.get("status") or {}, pods, hosts, lost, workers)
        moving = False
        if spec is not None:
            obs, moving = self._weights(obs, spec)
            obs = self._autoscale(obs, spec, autoscale)
        deployment, service = self.cluster.get_gateway(
            ref.namespace, builders.gateway_name(ref.name)
        )
        jobs = self.cluster.list_jobs(ref.namespace, job_selector(ref.name)) if spec else []
        policies = self.cluster.list_network_policies(ref.namespace, policy_selector(ref.name))
        return replace(
            obs,
            gateway=GatewayView.of(deployment, service),
            jobs=[JobView.of(j) for j in jobs],
            policies=policies,
            follow=moving or suspect,
        )

    def _weights(self, obs: Observation, spec: ModelDeploymentSpec) -> tuple[Observation, bool]:
        """The weights lifecycle's tick (weights.driver); True: weights are moving."""
        got = self.plans.gather(
            obs.ref, obs.pods + obs.hosts, obs.workers, spec.host_copies, self._nodes
        )
        with planning_with(self.hops.costs()):  # the learned start costs
            outcome = self.plans.tick(obs.ref, obs.generation, spec, got, utcnow())
        self.metrics.plans_ended(obs.ref, outcome.ended)
        self.hops.observe(e.hop for e in outcome.ended)
        plans = PlanState(outcome.decision.condition, outcome.decision.current_plan)
        return replace(obs, plans=plans, plan_events=outcome.events), outcome.moving

    def _autoscale(self, obs: Observation, spec: ModelDeploymentSpec, tick: bool) -> Observation:
        """An autoscaler tick, or its last facts; the per-pod loads a scale-down needs
        come from the tick's gateway read, or are read when someone else shrank it."""
        ref = obs.ref
        ran = self.autoscaler.tick(ref, spec, obs.pods, obs.generation) if tick else None
        facts = ran.facts if ran else self.autoscaler.last(ref, spec, obs.generation)
        if facts.recommendation is not None:
            self.metrics.autoscaled(ref, facts.recommendation)
        scaled_to = ran.scaled_to if ran else None
        shrinking = (scaled_to if scaled_to is not None else spec.replicas) < len(
            observe.alive(obs.pods)
        )
        in_flight: Mapping[str, int] = {}
        if shrinking:
            in_flight = (
                ran.in_flight
                if ran and ran.in_flight is not None
                else self.autoscaler.in_flight(ref)
            )
        return replace(
            obs,
            scaling=facts.shown,
            scaled_to=scaled_to,
            scale_events=facts.events,
            in_flight=in_flight,
        )

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
            try:
                self._nodes, self._nodes_read = self.cluster.list_nodes(), now
            except Exception:
                self._calm_since = utcnow()  # the API server unreachable: a disruption
                raise
            if disrupted(self._nodes):
                self._calm_since = utcnow()
        return lost_nodes(self._nodes, utcnow(), after_s, self._calm_since)

    def _pods(self, ns: str, selector: str) -> list[PodView]:
        return [PodView.of(p) for p in self.cluster.list_pods(ns, selector) if p.get("metadata")]
