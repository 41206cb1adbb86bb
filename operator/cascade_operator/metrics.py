"""The operator's Prometheus series: what it decided, how long it took, what came of it.

Series and labels are an interface (docs/observability.md; the chart's dashboard and
`cascade top` read them). Every per-deployment series carries `namespace` and
`deployment`; the other labels take values from closed sets (roles, serving modes, pod
phases, plan strategies and outcomes, start-up stages, the autoscaler's `Cause`), so
the cardinality is bounded by the number of deployments. Gauges of a deleted deployment
are removed (`forget`), so a dashboard does not show it forever.

The controller calls these methods with what it observed; nothing here reads the
cluster. `serve` exposes the registry on the operator's `metrics` port.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from cascade_api.scaleplan import PlanPhase, PlanStrategy
from cascade_autoscaler.cause import Cause
from cascade_autoscaler.policy_types import Recommendation
from cascade_operator.observed import MdRef, PodView
from cascade_operator.weights.ended import PlanEnd
from cascade_protocol.roles import InstanceRole
from cascade_protocol.status import ServingMode, StartupInfo, StartupStage, WeightsFrom

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
PLAN_BUCKETS = (0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
STARTUP_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
UNKNOWN_MODE = "unknown"  # the worker did not say (not answering yet)
NO_ROLE = "none"  # the autoscaler has not labelled the pod
SIGNALS = ("interactive", "batch")  # the backpressure gauge's signal label
ENDS = (PlanPhase.COMPLETED.value, PlanPhase.FAILED.value, PlanPhase.CANCELLED.value)
ESTIMATES = ("predicted", "measured")


def pod_phase(pod: PodView) -> str:
    """One word per pod for the instances gauge (closed set)."""
    if pod.terminating:
        return "Terminating"
    if pod.failed:
        return "Failed"
    if pod.ready:
        return "Ready"
    return "Running" if pod.phase == "Running" else "Pending"


def instance_rows(
    pods: Sequence[PodView], modes: Mapping[str, ServingMode]
) -> Tally[tuple[str, str, str]]:
    """Worker pods counted by (role, mode, phase): the instances gauge's label sets."""
    rows: Tally[tuple[str, str, str]] = Tally()
    for pod in pods:
        role = str(pod.role) if pod.labelled else NO_ROLE
        mode = str(modes[pod.name]) if pod.name in modes else UNKNOWN_MODE
        rows[(role, mode, pod_phase(pod))] += 1
    return rows


class OperatorMetrics:
    """All series of one operator process, in one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        md = ["namespace", "deployment"]
        r = self.registry
        self.reconciles = Counter(
            "cascade_operator_reconciles", "Reconciles run.", md, registry=r
        )  # fmt: skip
        self.reconcile_errors = Counter(
            "cascade_operator_reconcile_errors", "Reconciles that raised.", md, registry=r
        )
        self.reconcile_seconds = Histogram(
            "cascade_operator_reconcile_duration_seconds",
            "Wall time of one reconcile.",
            md,
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.plans = Counter(
            "cascade_operator_scaleplans",
            "ScalePlans that reached a final phase, by strategy and outcome.",
            [*md, "strategy", "outcome"],
            registry=r,
        )
        self.plan_seconds = Histogram(
            "cascade_operator_scaleplan_transfer_seconds",
            "Completed plans' completion seconds: predicted by the planner, measured by "
            "the workers (the slowest target).",
            [*md, "strategy", "estimate"],
            buckets=PLAN_BUCKETS,
            registry=r,
        )
        self.desired = Gauge(
            "cascade_operator_autoscaler_desired_replicas",
            "The autoscaler's last recommendation by role.",
            [*md, "role"],
            registry=r,
        )
        self.backpressure = Gauge(
            "cascade_operator_autoscaler_backpressure",
            "interactive: IBP, the busy share of interactive + mixed instances (NaN with "
            "none); batch: request groups expected to miss their deadline at the current count.",
            [*md, "signal"],
            registry=r,
        )
        self.theta = Gauge(
            "cascade_operator_autoscaler_theta", "The IBP target in use.", md, registry=r
        )
        self.decisions = Counter(
            "cascade_operator_autoscaler_decisions",
            "Autoscaler ticks by cause (a closed set: docs/observability.md).",
            [*md, "reason"],
            registry=r,
        )
        self.reason = Gauge(
            "cascade_operator_autoscaler_reason",
            "1 for the cause of the last autoscaler tick, 0 for the others.",
            [*md, "reason"],
            registry=r,
        )
        self.instances = Gauge(
            "cascade_operator_instances",
            "Worker pods by role label, serving mode and pod phase.",
            [*md, "role", "mode", "phase"],
            registry=r,
        )
        self.startup = Histogram(
            "cascade_operator_startup_stage_seconds",
            "Each instance's start-up stages, observed once when it first serves.",
            [*md, "stage", "weights_from"],
            buckets=STARTUP_BUCKETS,
            registry=r,
        )
        self._rows: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
        self._started: dict[tuple[str, str], set[str]] = {}
        self._autoscaled: dict[tuple[str, str], bool] = {}  # its autoscaler gauges exist

    def reconciled(self, ref: MdRef, seconds: float, *, failed: bool) -> None:
        labels = (ref.namespace, ref.name)
        self.reconciles.labels(*labels).inc()
        self.reconcile_seconds.labels(*labels).observe(seconds)
        errors = self.reconcile_errors.labels(*labels)  # exists at 0: rate() sees it
        if failed:
            errors.inc()

    def plans_ended(self, ref: MdRef, ended: Sequence[PlanEnd]) -> None:
        for plan in ended:
            self.plans.labels(ref.namespace, ref.name, plan.strategy, plan.outcome).inc()
            if plan.outcome != "Completed":
                continue
            for estimate, value in zip(ESTIMATES, (plan.predicted_s, plan.measured_s), strict=True):
                if value is not None:
                    series = self.plan_seconds.labels(
                        ref.namespace, ref.name, plan.strategy, estimate
                    )
                    series.observe(value)

    def autoscaled(self, ref: MdRef, rec: Recommendation) -> None:
        """One autoscaler tick's recommendation."""
        md = (ref.namespace, ref.name)
        self._autoscaled[md] = True
        roles = rec.roles
        for role, count in (
            (InstanceRole.INTERACTIVE, roles.interactive),
            (InstanceRole.MIXED, roles.mixed),
            (InstanceRole.BATCH, roles.batch),
        ):
            self.desired.labels(*md, role.value).set(count)
        ibp = float("nan") if rec.ibp is None else rec.ibp
        for signal, value in zip(SIGNALS, (ibp, float(rec.bbp)), strict=True):
            self.backpressure.labels(*md, signal).set(value)
        self.theta.labels(*md).set(rec.theta)
        self.decisions.labels(*md, rec.cause.value).inc()
        for cause in Cause:
            self.reason.labels(*md, cause.value).set(1.0 if cause is rec.cause else 0.0)

    def observed(
        self,
        ref: MdRef,
        pods: Sequence[PodView],
        modes: Mapping[str, ServingMode],
        startups: Mapping[str, StartupInfo],
    ) -> None:
        """The instances gauge now, and the start-up of instances that began serving."""
        key = (ref.namespace, ref.name)
        self._zeros(key)
        rows = instance_rows(pods, modes)
        for gone in self._rows.get(key, set()) - set(rows):
            self.instances.remove(*key, *gone)
        for row, count in rows.items():
            self.instances.labels(*key, *row).set(count)
        self._rows[key] = set(rows)
        seen = self._started.setdefault(key, set())
        uids = {p.name: p.uid for p in pods}
        for name, info in startups.items():
            uid = uids.get(name)
            if uid is None or uid in seen or info.ready_at is None:
                continue
            seen.add(uid)
            source = str(info.weights_from) if info.weights_from else "none"
            for stage, seconds in info.stages.items():
                self.startup.labels(*key, str(stage), source).observe(seconds)
        seen &= set(uids.values())  # forget pods that are gone

    def _zeros(self, key: tuple[str, str]) -> None:
        """Counters and histograms of a deployment exist at 0 from its first reconcile, so
        `increase()` sees its first plan and first start-up (a series born at 1 has no
        increase to show)."""
        if key in self._started:
            return
        for strategy in PlanStrategy:
            for outcome in ENDS:
                self.plans.labels(*key, strategy.value, outcome)
            for estimate in ESTIMATES:
                self.plan_seconds.labels(*key, strategy.value, estimate)
        for stage in StartupStage:
            for source in WeightsFrom:
                self.startup.labels(*key, stage.value, source.value)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted deployment's gauges (counters and histograms stay: rates)."""
        key = (namespace, name)
        for row in self._rows.pop(key, set()):
            self.instances.remove(*key, *row)
        self._started.pop(key, None)
        if self._autoscaled.pop(key, None) is None:
            return
        for role in InstanceRole:
            self.desired.remove(*key, role.value)
        for signal in SIGNALS:
            self.backpressure.remove(*key, signal)
        for cause in Cause:
            self.reason.remove(*key, cause.value)
        self.theta.remove(*key)


def serve(registry: CollectorRegistry, port: int) -> None:
    """Expose `registry` on 0.0.0.0:`port` /metrics (a daemon thread)."""
    start_http_server(port, registry=registry)
