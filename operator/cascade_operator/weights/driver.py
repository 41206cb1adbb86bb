"""Glue of the weight-moving half: gather (worker statuses, nodes, ScalePlans, a
holder's block table), call the pure deciders (pool.decide_pool, then
lifecycle.decide_plans), apply what they decided, in an order that is safe to repeat:

1. new ScalePlans (AlreadyExists is success: names are derived, so a restarted operator
   re-derives the same name instead of making a second plan);
2. transfer orders, sources first; a plan whose orders were not all delivered keeps its
   Pending status (its Running patch is skipped) and is dispatched again next tick;
3. plan status patches; 4. serve and load orders; 5. finished plans beyond history;
6. pods the lifecycle gives up on (reconcile recreates them).

The deployment's status (Planned condition, currentPlan) is assembled by the controller
(status.py) from the returned decision.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaleplan import Block
from cascade_operator.clients.kube import Body, Cluster, KubeRefusal
from cascade_operator.clients.workers import WorkerClient
from cascade_operator.events import EventNote
from cascade_operator.observed import START_AWAIT, MdRef, PodView
from cascade_operator.weights.ended import PlanEnd, plan_ends
from cascade_operator.weights.lifecycle import (
    PlanDecision,
    PlansInput,
    decide_plans,
    manifest_source,
)
from cascade_operator.weights.motion import in_motion, storage_start_pending
from cascade_operator.weights.plans import PlanView, plan_selector
from cascade_operator.weights.pool import PoolDecision, PoolInput, decide_pool
from cascade_operator.weights.progress import PlanPolicy
from cascade_operator.weights.workers import WorkerView
from cascade_planner import Topology, topology_from_nodes

log = logging.getLogger(__name__)


@dataclass
class Gathered:
    pods: list[PodView]
    workers: list[WorkerView]  # the same pods, each with its worker's status
    pool: PoolDecision
    topo: Topology
    plans: list[PlanView]
    read_at: float = field(default_factory=time.monotonic)  # just after the workers were read


@dataclass
class Outcome:
    decision: PlanDecision
    events: list[EventNote]
    moving: bool  # poll again soon
    ended: list[PlanEnd] = field(default_factory=list)  # plans this tick took to a final phase


class PlanDriver:
    def __init__(
        self, cluster: Cluster, workers: WorkerClient, policy: PlanPolicy | None = None
    ) -> None:
        self.cluster = cluster
        self.http = workers
        self.policy = policy or PlanPolicy()
        self._blocks: dict[str, list[Block]] = {}  # digest -> block table (immutable)
        self._last_patch: dict[tuple[str, str], datetime] = {}  # (ns, plan) -> when
        # Pod uids this operator told to serve. A serve order goes once per pod, and only
        # to pods that started awaiting weights: a pod someone drained on purpose (or one
        # that loaded from storage and serves by itself) is not started again behind
        # their back. Memory only: after a restart a drained pod may be served once more.
        self._served: set[str] = set()

    def workers(self, pods: Sequence[PodView]) -> list[WorkerView]:
        """Each pod with its worker's GET /v1/status (asked in parallel; None when the
        pod does not run or its worker does not answer)."""
        statuses = self.http.statuses([p.ip if p.running else None for p in pods])
        return [WorkerView.of(p, s) for p, s in zip(pods, statuses, strict=True)]

    def gather(
        self,
        ref: MdRef,
        pods: list[PodView],
        workers: list[WorkerView],
        host_copies: int,
        nodes: list[Body] | None = None,
    ) -> Gathered:
        """`nodes`: a Node list read moments ago (the controller's, at most 2 s old), so
        the tick that plans for a target that just answered lists no Nodes itself."""
        topo = topology_from_nodes(self.cluster.list_nodes() if nodes is None else nodes)
        pool = decide_pool(PoolInput(workers, host_copies, now=time.time()))
        plans = [
            PlanView.of(b, last_patch=self._last_patch.get((ref.namespace, b["metadata"]["name"])))
            for b in self.cluster.list_scaleplans(ref.namespace, plan_selector(ref.name))
        ]
        return Gathered(pods, workers, pool, topo, plans)

    def _block_table(self, pool: PoolDecision, workers: Sequence[WorkerView]) -> list[Block] | None:
        source = manifest_source(pool)
        digest = pool.model_digest
        if source is None or digest is None:
            return None
        if digest in self._blocks:
            return self._blocks[digest]
        ip = next((w.ip for w in workers if w.name == source), None)
        info = self.http.manifest(ip) if ip else None
        if info is None or info.model_digest != digest:
            return None
        self._blocks[digest] = list(info.blocks)
        return self._blocks[digest]

    def tick(
        self,
        ref: MdRef,
        generation: int,
        spec: ModelDeploymentSpec,
        got: Gathered,
        now: datetime,
    ) -> Outcome:
        ns = ref.namespace
        inp = PlansInput(
            ref=ref,
            generation=generation,
            spec=spec,
            workers=got.workers,
            plans=got.plans,
            topo=got.topo,
            pool=got.pool,
            blocks=self._block_table(got.pool, got.workers),
        )
        d = decide_plans(inp, now, self.policy)
        if d.load and storage_start_pending(got.pods, got.workers, now):
            d.load = []  # the first instance loads from storage at start already
        undelivered = self._create_and_dispatch(ns, d)
        for plan in sorted({o.plan for o in d.transfers} - undelivered):
            took = time.monotonic() - got.read_at
            log.info("%s: %s dispatched %.3f s after its workers were read", ns, plan, took)
        unwritten = undelivered | self._write_statuses(ns, d, undelivered, now)
        self._serve_and_load(d, got.pods)
        for name in d.delete:
            self.cluster.delete_scaleplan(ns, name)
            self._last_patch.pop((ns, name), None)
        for pod in d.replace_pods:
            self.cluster.delete_pod(ns, pod)
        moving = in_motion(got.workers, got.plans, d)
        told = [
            e
            for e in d.events
            if not (e.reason == "ScalePlanDispatched" and e.message.split(":")[0] in undelivered)
        ]
        return Outcome(d, told, moving, plan_ends(got.plans, d.patches, unwritten))

    def _create_and_dispatch(self, ns: str, d: PlanDecision) -> set[str]:
        """Create new plans and send transfer orders; the plans not fully delivered.
        A plan the API server refuses is logged and tried again next tick; the rest of
        the reconcile (other plans, pods) goes on."""
        undelivered: set[str] = set()
        for manifest in d.create:
            name = manifest["metadata"]["name"]
            try:
                if not self.cluster.create_scaleplan(manifest):
                    log.info("%s/%s: ScalePlan exists already", ns, name)
            except KubeRefusal as err:
                undelivered.add(name)
                log.error("%s/%s: creating the ScalePlan failed: %s", ns, name, err.message)
        for order in d.transfers:
            if order.plan in undelivered:
                continue
            sent = self.http.send(order)
            if not sent.ok:
                undelivered.add(order.plan)
                log.warning(
                    "%s: transfer order to %s failed (%s): %s",
                    order.plan,
                    order.pod,
                    sent.status,
                    sent.detail,
                )
        return undelivered

    def _write_statuses(
        self, ns: str, d: PlanDecision, undelivered: set[str], now: datetime
    ) -> set[str]:
        """Write the plans' statuses; the names whose write failed."""
        failed: set[str] = set()
        for patch in d.patches:
            if patch.plan in undelivered:
                continue
            try:
                self.cluster.patch_scaleplan_status(ns, patch.plan, patch.status)
            except KubeRefusal as err:
                log.error("%s/%s: status write failed: %s", ns, patch.plan, err.message)
                failed.add(patch.plan)
                continue
            self._last_patch[(ns, patch.plan)] = now
        return failed

    def _serve_and_load(self, d: PlanDecision, pods: Sequence[PodView]) -> None:
        awaiting = {p.name: p.uid for p in pods if p.start == START_AWAIT}
        d.serve = [o for o in d.serve if awaiting.get(o.pod) not in (None, *self._served)]
        served = self.http.send_all(d.serve)
        self._served |= {awaiting[s.pod] for s in served if s.ok}
        for delivery in [*served, *self.http.send_all(d.load)]:
            if not delivery.ok:
                log.warning(
                    "order to %s failed (%s): %s", delivery.pod, delivery.status, delivery.detail
                )
