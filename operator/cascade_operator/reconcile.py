"""One reconcile's decision, pure: from what it observed to the writes and the status.

The controller reads once (`Observation`), runs the two deciders that keep memory and
talk to workers or gateways (the weights lifecycle, the autoscaler tick), and hands
their outcome here with the rest. `decide` joins the instance, host-copy, profile-Job
and NetworkPolicy decisions into one `Actions`, in the order the controller makes the
calls, and the status they lead to. Tested tick by tick without a cluster
(tests/unit/test_reconcile_decide.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from cascade_api.modeldeployment import HostCopyStatus, ModelDeploymentStatus
from cascade_operator import builders, instances
from cascade_operator.config import OperatorConfig
from cascade_operator.events import EventNote
from cascade_operator.host_copies import HostCopyDecision, decide_host_copies
from cascade_operator.materialization import (
    JobView,
    MaterializationDecision,
    decide_materialization,
)
from cascade_operator.network_policies import changed, network_policies
from cascade_operator.node_loss import lost_event
from cascade_operator.observed import GatewayView, MdRef, Observed, PodView
from cascade_operator.spec import ParsedSpec
from cascade_operator.status import PlanState, ScalingShown, StatusInput, StatusUpdate, assemble
from cascade_operator.weights.workers import WorkerView, job_failures
from cascade_protocol.status import ServingMode, StartupInfo

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Observation:
    """What one reconcile read, and what the deciders with memory made of it."""

    ref: MdRef
    generation: int
    stored: Manifest  # the stored status, as the API returned it
    pods: list[PodView]  # worker pods, those on lost nodes left out
    hosts: list[PodView] = field(default_factory=list)  # host-copy pods, likewise
    lost: list[PodView] = field(default_factory=list)  # pods on lost nodes (node_loss.py)
    workers: list[WorkerView] = field(default_factory=list)  # pods and hosts, as they answer
    gateway: GatewayView = field(default_factory=GatewayView)
    jobs: list[JobView] = field(default_factory=list)  # the deployment's profile Jobs
    policies: list[Manifest] = field(default_factory=list)  # its NetworkPolicies
    in_flight: Mapping[str, int] = field(default_factory=dict)  # read when shrinking
    plans: PlanState | None = None  # the weights lifecycle's (None: did not run)
    scaling: ScalingShown | None = None  # the autoscaler's (None: invalid spec)
    scaled_to: int | None = None  # spec.replicas the autoscaler wrote this reconcile
    scale_events: list[EventNote] = field(default_factory=list)  # the autoscaler's to tell
    plan_events: list[EventNote] = field(default_factory=list)  # the lifecycle's to tell
    follow: bool = False  # weights moving or a node not reporting: look every second


@dataclass(frozen=True)
class Actions:
    """The writes, in the order they are made, and the status they lead to."""

    status: StatusInput  # the status these writes lead to, less what is refused
    force_delete: list[str] = field(default_factory=list)  # pods on lost nodes, first
    create_jobs: list[Manifest] = field(default_factory=list)
    delete_jobs: list[str] = field(default_factory=list)
    create_pods: list[Manifest] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    apply: list[Manifest] = field(default_factory=list)  # gateway objects, NetworkPolicies
    events: list[EventNote] = field(default_factory=list)

    def status_update(self, now: datetime, refused: str | None = None) -> StatusUpdate:
        """The status to write once the calls are made; `refused`: what `Degraded` says
        of the API server's refusals (refusals.degraded_message)."""
        return assemble(replace(self.status, refused=refused), now)


def decide(obs: Observation, parsed: ParsedSpec, cfg: OperatorConfig) -> Actions:
    """Everything one reconcile changes; while the spec is invalid only what does not
    depend on it (lost pods, NetworkPolicies, the status saying why)."""
    spec = parsed.accepted
    if spec is not None and obs.scaled_to is not None:
        spec = spec.model_copy(update={"replicas": obs.scaled_to})
    view = Observed(obs.ref, obs.generation, obs.stored, obs.pods, obs.gateway, obs.in_flight)
    pods = instances.decide(view, spec, cfg, has_copy=_alive(obs.hosts))
    copies = decide_host_copies(obs.ref, spec, obs.hosts, cfg) if spec else HostCopyDecision()
    job = (
        decide_materialization(obs.ref, spec, obs.jobs, cfg)
        if spec is not None
        else MaterializationDecision()
    )
    events = [*obs.scale_events, *pods.events, *copies.events, *job.events]
    events += [lost_event(obs.lost)] if obs.lost else []
    return Actions(
        force_delete=[p.name for p in obs.lost],
        create_jobs=job.create,
        delete_jobs=job.delete,
        create_pods=[*pods.create_pods, *copies.create],
        delete_pods=[*pods.delete_pods, *copies.delete],
        apply=[*pods.gateway, *changed(network_policies(obs.ref, cfg), obs.policies)],
        status=_status(obs, parsed, job if spec is not None else None),
        events=[*events, *obs.plan_events],
    )


def _status(
    obs: Observation, parsed: ParsedSpec, job: MaterializationDecision | None
) -> StatusInput:
    """What the status shows of this observation; the workers that did not answer this
    time are absent from each map and keep what was last written."""
    workers = obs.workers
    spec = parsed.accepted
    return StatusInput(
        previous=ModelDeploymentStatus.model_validate(obs.stored),
        generation=obs.generation,
        parsed=parsed,
        pods=obs.pods,
        gateway=obs.gateway,
        selector=builders.worker_selector(obs.ref.name),
        endpoint=builders.gateway_endpoint(obs.ref),
        blocks={w.name: w.blocks_loaded for w in workers if w.phase is not None},
        modes=modes(workers),
        failures=job_failures(workers, spec.model.uri if spec is not None else None),
        startups=startups(workers),
        materializations={
            w.name: w.materialization for w in workers if w.materialization is not None
        },
        materialization=job.shown if job is not None else None,
        host_copies=[
            HostCopyStatus(pod=w.name, node=w.node, ready=w.has_model, bytes_held=w.store_bytes)
            for w in workers
            if w.host_copy
        ],
        plans=obs.plans,
        scaling=obs.scaling,
    )


def modes(workers: Sequence[WorkerView]) -> dict[str, ServingMode]:
    """How each worker that answered serves."""
    return {w.name: w.mode for w in workers if w.mode is not None}


def startups(workers: Sequence[WorkerView]) -> dict[str, StartupInfo]:
    """Each answering worker's start-up report."""
    return {w.name: w.startup for w in workers if w.startup is not None}


def _alive(pods: Sequence[PodView]) -> bool:
    return any(not p.terminating and not p.failed for p in pods)
