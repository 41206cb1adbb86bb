"""What the ScalePlan lifecycle reads and what it decides: plain data, no logic beyond
the `Planned` condition it sets. Shared by lifecycle.py and starts.py (which makes new
plans), so neither imports the other's internals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cascade_api.base import Condition, ConditionStatus, ConditionType
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaleplan import Block
from cascade_operator.events import EventNote
from cascade_operator.observed import MdRef
from cascade_operator.weights.orders import LoadOrder, ServeOrder, TransferOrder
from cascade_operator.weights.plans import PlanView
from cascade_operator.weights.pool import PoolDecision
from cascade_operator.weights.workers import WorkerView
from cascade_planner import Topology

Manifest = dict[str, Any]


@dataclass(frozen=True)
class PlansInput:
    ref: MdRef
    generation: int
    spec: ModelDeploymentSpec  # the accepted spec
    workers: Sequence[WorkerView]
    plans: Sequence[PlanView]  # ScalePlans owned by the deployment
    topo: Topology
    pool: PoolDecision  # pool.decide_pool over the same workers
    # The block table of pool.model_digest (GET /v1/control/manifest from the pod
    # `manifest_source` names); None when not fetched.
    blocks: Sequence[Block] | None = None


@dataclass(frozen=True)
class StatusPatch:
    plan: str
    status: Manifest  # the whole ScalePlan status (merge-patch it onto /status)


@dataclass
class PlanDecision:
    condition: Condition | None = None  # Planned: merge into the deployment's conditions
    create: list[Manifest] = field(default_factory=list)  # ScalePlans to create
    patches: list[StatusPatch] = field(default_factory=list)
    transfers: list[TransferOrder] = field(default_factory=list)  # send, then patch
    serve: list[ServeOrder] = field(default_factory=list)
    load: list[LoadOrder] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)  # finished ScalePlans to delete
    replace_pods: list[str] = field(default_factory=list)  # delete; reconcile recreates
    events: list[EventNote] = field(default_factory=list)
    current_plan: str | None = None  # for the deployment's status.currentPlan


def planned(inp: PlansInput, out: PlanDecision, ok: bool, reason: str, message: str) -> None:
    """Set the deployment's Planned condition in `out`."""
    status = ConditionStatus.TRUE if ok else ConditionStatus.FALSE
    out.condition = Condition(
        type=ConditionType.PLANNED,
        status=status,
        reason=reason,
        message=message,
        observed_generation=inp.generation,
    )
