"""Glue of the weight-moving lifecycle: gather (pods, worker statuses, nodes, ScalePlans,
a holder's block table), call the pure deciders (pool.decide_pool, then
scaleplans.decide_plans), apply what they decided, in an order that is safe to repeat:

1. host-copy annotations (the pool's memory lives on the pods);
2. new ScalePlans (AlreadyExists is success: names are derived, so a restarted operator
   re-derives the same name instead of making a second plan);
3. transfer orders, sources first; a plan whose orders were not all delivered keeps its
   Pending status (its Running patch is skipped) and is dispatched again next tick;
4. plan status patches; 5. serve and load orders; 6. finished plans beyond history;
7. pods the lifecycle gives up on (reconcile recreates them).

The deployment's status (Planned condition, currentPlan) and events are merged by the
controller, after reconcile built its own status.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kubernetes.client.exceptions import ApiException

from cascade_api.modeldeployment import ModelDeploymentSpec, ModelDeploymentStatus
from cascade_api.scaleplan import Block
from cascade_operator.builders import START_ANNOTATION, START_AWAIT
from cascade_operator.clients import Body, Cluster, api_message
from cascade_operator.lifecycle import in_motion, storage_start_pending
from cascade_operator.plan_objects import PlanView, plan_selector
from cascade_operator.plan_status import PlanPolicy
from cascade_operator.pool import PoolDecision, PoolInput, decide_pool, pool_events
from cascade_operator.reconcile import EventNote
from cascade_operator.scaleplans import PlanDecision, PlansInput, decide_plans, manifest_source
from cascade_operator.view import MdRef
from cascade_operator.workerclient import WorkerClient
from cascade_operator.workers import HOST_COPY_ANNOTATION, WorkerView
from cascade_planner import Topology, topology_from_nodes

log = logging.getLogger(__name__)


@dataclass
class Gathered:
    workers: list[WorkerView]
    pool: PoolDecision
    topo: Topology
    plans: list[PlanView]
    raw_pods: list[Body] = field(default_factory=list)


@dataclass
class Outcome:
    decision: PlanDecision
    events: list[EventNote]
    moving: bool  # poll again soon


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

    def gather(self, ref: MdRef, raw_pods: list[Body], host_copies: int) -> Gathered:
        pods = [p for p in raw_pods if p.get("metadata")]
        ips = [(p.get("status") or {}).get("podIP") for p in pods]
        statuses = self.http.statuses(ips)
        workers = [WorkerView.of(p, s) for p, s in zip(pods, statuses, strict=True)]
        topo = topology_from_nodes(self.cluster.list_nodes())
        pool = decide_pool(PoolInput(workers, host_copies, topo))
        plans = [
            PlanView.of(b, last_patch=self._last_patch.get((ref.namespace, b["metadata"]["name"])))
            for b in self.cluster.list_scaleplans(ref.namespace, plan_selector(ref.name))
        ]
        return Gathered(workers, pool, topo, plans, pods)

    def _block_table(self, pool: PoolDecision, workers: Sequence[WorkerView]) -> list[Block] | None:
        source = manifest_source(pool, workers)
        digest = pool.model_digest
        if source is None or digest is None:
            return None
        if digest in self._blocks:
            return self._blocks[digest]
        ip = next((w.ip for w in workers if w.name == source), None)
        doc = self.http.manifest(ip) if ip else None
        if doc is None or doc.get("model_digest", digest) != digest:
            return None
        table = [Block.model_validate(b) for b in doc.get("blocks") or []]
        self._blocks[digest] = table
        return table

    def tick(
        self,
        body: Body,
        ref: MdRef,
        spec: ModelDeploymentSpec,
        got: Gathered,
        now: datetime,
    ) -> Outcome:
        ns = ref.namespace
        md_status = body.get("status") or {}
        conditions = ModelDeploymentStatus.model_validate(md_status).conditions
        inp = PlansInput(
            ref=ref,
            generation=int(body["metadata"].get("generation", 0)),
            spec=spec,
            workers=got.workers,
            plans=got.plans,
            topo=got.topo,
            pool=got.pool,
            blocks=self._block_table(got.pool, got.workers),
            conditions=conditions,
        )
        d = decide_plans(inp, now, self.policy)
        if d.load and storage_start_pending(got.raw_pods, got.workers, now):
            d.load = []  # the first instance loads from storage at start already
        awaiting = {
            p["metadata"]["name"]: str(p["metadata"].get("uid"))
            for p in got.raw_pods
            if (p["metadata"].get("annotations") or {}).get(START_ANNOTATION) == START_AWAIT
        }
        events = pool_events(got.pool) if got.pool.changes else []
        for ch in got.pool.changes:
            value = "true" if ch.keep else None
            self.cluster.annotate_pod(ns, ch.pod, HOST_COPY_ANNOTATION, value)
        # A plan whose create or status write the API server refuses is skipped, logged,
        # and tried again next tick; the rest of the reconcile (other plans, pods) goes on.
        undelivered: set[str] = set()
        for manifest in d.create:
            name = manifest["metadata"]["name"]
            try:
                if not self.cluster.create_scaleplan(manifest):
                    log.info("%s/%s: ScalePlan exists already", ns, name)
            except ApiException as err:
                undelivered.add(name)
                log.error("%s/%s: creating the ScalePlan failed: %s", ns, name, api_message(err))
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
        for patch in d.patches:
            if patch.plan in undelivered:
                continue
            try:
                self.cluster.patch_scaleplan_status(ns, patch.plan, patch.status)
            except ApiException as err:
                log.error("%s/%s: status write failed: %s", ns, patch.plan, api_message(err))
                continue
            self._last_patch[(ns, patch.plan)] = now
        d.serve = [o for o in d.serve if awaiting.get(o.pod) not in (None, *self._served)]
        served = self.http.send_all(d.serve)
        self._served |= {awaiting[s.pod] for s in served if s.ok}
        for delivery in [*served, *self.http.send_all(d.load)]:
            if not delivery.ok:
                log.warning(
                    "order to %s failed (%s): %s", delivery.pod, delivery.status, delivery.detail
                )
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
        return Outcome(d, [*events, *told], moving)
