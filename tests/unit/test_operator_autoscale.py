"""The operator's autoscaler glue: the context it builds from pods and gateway reports,
the fewest role relabels, and ticks through the controller against an in-memory API
server and a fake gateway (one writer: External never writes replicas)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from operator_fixtures import MODEL_URI, NOW, REF, FakeCluster, FakeWorkers, md, pod

from cascade_api import constants as c
from cascade_autoscaler.policy_types import AutoscaleSpec, Roles
from cascade_operator.autoscale import observe
from cascade_operator.autoscale.roles import relabel
from cascade_operator.autoscale.tick import Autoscaler
from cascade_operator.config import OperatorConfig
from cascade_operator.controller import Controller
from cascade_protocol.gateway_load import BackendLoad, ClassLoad, Demand, GatewayLoad, QueuedBatch
from cascade_protocol.roles import InstanceRole

INTER, M, B = InstanceRole.INTERACTIVE, InstanceRole.MIXED, InstanceRole.BATCH


def backend(name: str, role: InstanceRole, interactive: int = 0, total: int = 0) -> BackendLoad:
    return BackendLoad(
        url=f"http://{name}:8080",
        pod=name,
        role=role,
        ready=True,
        draining=False,
        in_flight=max(total, interactive),
        interactive_in_flight=interactive,
        running=max(total, interactive),
        waiting=0,
        max_batch=8,
        kv_cache_usage=0.0,
        tokens_per_s=50.0 * max(total, interactive),
    )


def gateway(
    backends: list[BackendLoad] = (),  # type: ignore[assignment]
    *,
    queued: int = 0,
    batch_queued: int = 0,
    demand: Demand | None = None,
) -> GatewayLoad:
    inter = sum(b.interactive_in_flight for b in backends)
    return GatewayLoad(
        model="m",
        deployment=REF.name,
        draining=False,
        backends_total=len(backends),
        backends_ready=len(backends),
        tokens_per_s=sum(b.tokens_per_s for b in backends),
        classes={
            "interactive": ClassLoad(queued=queued, in_flight=inter, queue_limit=64),
            "batch": ClassLoad(queued=batch_queued, in_flight=0, queue_limit=64),
        },
        backends=list(backends),
        demand=demand or Demand(),
    )


# The context.


def test_busy_is_the_interactive_occupancy_of_interactive_and_mixed_backends() -> None:
    # caps 8: a has 1 of 8, b 2 of 8 (c runs batch work only, d is batch-role: neither
    # counts), and the 2 waiting requests count over the mean cap 8.
    load = gateway(
        [backend("a", INTER, 1), backend("b", M, 2), backend("c", M, 0, 3), backend("d", B, 0, 4)],
        queued=2,
    )
    got = observe.load([load], now=100.0, default_cap=32)
    assert got.busy == pytest.approx(1 / 8 + 2 / 8 + 2 / 8)
    assert (got.queued, got.in_flight) == (2, 3)


def test_busy_adds_each_gateways_share_of_a_backend() -> None:
    one = gateway([backend("a", M, 3)])
    two = gateway([backend("a", M, 5)])
    assert observe.load([one, two], now=0.0, default_cap=32).busy == pytest.approx(1.0)


def test_waiting_requests_use_the_engines_cap_before_any_backend_reports() -> None:
    got = observe.load([gateway(queued=16)], now=0.0, default_cap=32)
    assert got.busy == pytest.approx(0.5)
    # A starting worker is a backend too, not ready, with the placeholder cap 1: it must
    # not turn 4 waiting requests into 4 instances' worth (seen scaling from zero).
    starting = backend("a", M).model_copy(update={"ready": False, "max_batch": 1})
    got = observe.load([gateway([starting], queued=4)], now=0.0, default_cap=32)
    assert got.busy == pytest.approx(4 / 32)


def test_batch_queue_turns_relative_times_into_the_operators_clock() -> None:
    demand = Demand(
        batch_queue=[QueuedBatch(age_s=5, deadline_in_s=55, prompt_tokens=10, max_tokens=64)]
    )
    f = observe.fleet(2, [pod(0, ready=True, role=B), pod(1, ready=False)])
    ctx = observe.batch_context([gateway(demand=demand)], f, now=1000.0, tokens_per_s=200.0)
    (req,) = ctx.queue
    assert (req.arrival_s, req.deadline_s, req.max_tokens) == (995.0, 1055.0, 64)
    # No finished request yet: each queued request is assumed to use all of max_tokens.
    assert (ctx.output_mean_tokens, ctx.output_std_tokens) == (64.0, 0.0)
    assert (ctx.batch_instances, f.starting, f.mixed) == (1, 1, 1)


def test_a_pod_unready_for_minutes_is_stuck_not_starting() -> None:
    # The policy holds scale-down while instances start; a pod that never gets Ready
    # (unschedulable) must not hold it for ever.
    young = pod(1, ready=False, created=NOW - timedelta(seconds=20))
    stuck = pod(2, ready=False, created=NOW - observe.STUCK_AFTER)
    assert observe.fleet(3, [pod(0), young, stuck], NOW).starting == 1
    assert observe.fleet(3, [pod(0), young, stuck]).starting == 2  # no clock: all count


def test_output_lengths_pool_gateways_by_sample_count() -> None:
    a = Demand(output_tokens_mean=100, output_tokens_std=10, output_samples=3)
    b = Demand(output_tokens_mean=200, output_tokens_std=30, output_samples=1)
    ctx = observe.batch_context([gateway(demand=a), gateway(demand=b)], observe.fleet(0, []), 0, 1)
    assert (ctx.output_mean_tokens, ctx.output_std_tokens) == (125.0, 30.0)


def test_arrivals_add_up_bucket_by_bucket_aligned_on_the_newest() -> None:
    a = Demand(interactive_arrivals=[1, 2, 3])
    b = Demand(interactive_arrivals=[10])
    got = observe.arrivals([gateway(demand=a), gateway(demand=b)], time_to_ready_s=30)
    assert got.counts == (1, 2, 13) and got.time_to_ready_s == 30


def test_time_to_ready_is_the_median_creation_to_ready() -> None:
    pods = [
        pod(i, ready=True, created=NOW, ready_since=NOW + timedelta(seconds=s))
        for i, s in enumerate((10, 30, 20))
    ]
    assert observe.time_to_ready(pods) == 20
    assert observe.time_to_ready([pod(0)]) == observe.DEFAULT_TIME_TO_READY_S


def test_instance_throughput_is_the_peak_seen_so_far() -> None:
    load = gateway([backend("a", M, 2)])  # 100 tok/s
    assert observe.peak_tokens_per_s([load], None) == 100.0
    assert observe.peak_tokens_per_s([gateway()], 100.0) == 100.0
    assert observe.peak_tokens_per_s([], None) == observe.DEFAULT_INSTANCE_TOKENS_PER_S


def test_spec_maps_theta_unset_to_auto() -> None:
    spec = AutoscaleSpec.of(md(scaling={"minReplicas": 0, "maxReplicas": 4}))
    assert (spec.theta, spec.delta, spec.min_replicas, spec.max_replicas) == ("auto", 0.1, 0, 4)
    fixed = md(scaling={"maxReplicas": 4, "interactiveBackpressure": {"target": 0.6}})
    assert AutoscaleSpec.of(fixed).theta == 0.6


# Roles.


def test_relabel_moves_the_fewest_pods() -> None:
    pods = [
        pod(0, ready=True, role=INTER, labelled=True),
        pod(1, ready=True, labelled=True),
        pod(2, ready=True, labelled=True),
        pod(3, labelled=True),
    ]
    assert relabel(pods, Roles(1, 3, 0)) == {}
    assert relabel(pods, Roles(1, 2, 1)) == {"llama-3": B}  # the not-ready one moves
    assert relabel(pods, Roles(2, 1, 1)) == {"llama-2": INTER, "llama-3": B}


def test_relabel_leaves_pods_beyond_the_wanted_total_alone() -> None:
    pods = [pod(0, ready=True, role=B, labelled=True), pod(1, ready=True, role=B, labelled=True)]
    assert relabel(pods, Roles(1, 0, 0)) == {"llama-0": INTER}


def test_relabel_writes_the_default_on_unlabelled_pods() -> None:
    assert relabel([pod(0), pod(1, role=B, labelled=True)], Roles(0, 1, 1)) == {"llama-0": M}


# Ticks through the controller.


class FakeGateways:
    def __init__(self) -> None:
        self.report: GatewayLoad | None = gateway()
        self.asked = 0

    def loads(self, ips: Any) -> list[GatewayLoad]:
        self.asked += 1
        return [self.report] if self.report is not None and ips else []


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def world(
    replicas: int, scaling: dict[str, Any]
) -> tuple[Controller, FakeCluster, FakeGateways, Clock]:
    cluster, gateways, clock = FakeCluster(), FakeGateways(), Clock()
    cluster.add(
        c.MD_KIND,
        {
            "apiVersion": c.API_VERSION,
            "kind": c.MD_KIND,
            "metadata": {"name": REF.name, "namespace": REF.namespace, "generation": 1},
            "spec": {"model": {"uri": MODEL_URI}, "replicas": replicas, "scaling": scaling},
        },
    )
    cluster.add(
        "Pod",
        {
            "metadata": {
                "name": "llama-gateway-x",
                "namespace": REF.namespace,
                "labels": {c.LABEL_DEPLOYMENT: REF.name, c.LABEL_COMPONENT: c.COMPONENT_GATEWAY},
            },
            "status": {"phase": "Running", "podIP": "10.0.0.9"},
        },
    )
    scaler = Autoscaler(cluster, gateways, clock)  # type: ignore[arg-type]
    controller = Controller(cluster, OperatorConfig(), FakeWorkers(), scaler)
    return controller, cluster, gateways, clock


def tick(controller: Controller, cluster: FakeCluster) -> dict[str, Any]:
    body = cluster.get_md(REF.namespace, REF.name)
    assert body is not None
    controller.autoscale(REF.namespace, REF.name, body["spec"])
    return dict(body.get("status") or {})


def worker_pods(cluster: FakeCluster) -> list[str]:
    selector = f"{c.LABEL_COMPONENT}={c.COMPONENT_WORKER}"
    return [p["metadata"]["name"] for p in cluster.list_pods(REF.namespace, selector)]


def test_request_held_at_zero_scales_to_one_within_one_tick_and_creates_the_pod() -> None:
    controller, cluster, gateways, _ = world(0, {"minReplicas": 0, "maxReplicas": 4})
    gateways.report = gateway(queued=1, demand=Demand(held=1, last_arrival_age_s=0.2))
    status = tick(controller, cluster)
    assert cluster.scale_writes == [1]
    assert worker_pods(cluster) == ["llama-0"]  # in the same reconcile
    assert status["autoscaler"]["owner"] == "Cascade"
    assert status["autoscaler"]["desiredReplicas"] == 1
    assert "lastScaleTime" in status["autoscaler"]
    conds = {cd["type"]: cd for cd in status["conditions"]}
    assert conds["ScalingActive"]["status"] == "True"
    rescale = [e for e in cluster.events if e.reason == "SuccessfulRescale"]
    assert len(rescale) == 1 and "New size: 1 (was 0)" in rescale[0].message


def test_idle_deployment_goes_to_zero_after_the_keep_alive() -> None:
    scaling = {
        "minReplicas": 0,
        "maxReplicas": 4,
        "keepAliveSeconds": 60,
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
    }
    controller, cluster, gateways, clock = world(1, scaling)
    gateways.report = gateway([backend("llama-0", M)])
    tick(controller, cluster)
    assert cluster.scale_writes == []  # warm within the keep-alive
    clock.t += 61
    status = tick(controller, cluster)
    assert cluster.scale_writes == [0]
    assert "keep-alive" in status["autoscaler"]["reason"]


def test_external_owner_never_writes_replicas_or_asks_the_gateway() -> None:
    controller, cluster, gateways, _ = world(
        1, {"minReplicas": 1, "maxReplicas": 8, "autoscaler": "External"}
    )
    gateways.report = gateway(queued=50)
    for _ in range(5):
        status = tick(controller, cluster)
        controller.reconcile(REF.namespace, REF.name)
    assert cluster.scale_writes == [] and gateways.asked == 0
    assert status["autoscaler"]["owner"] == "External" or status == {}


def test_unset_max_replicas_is_external_and_shows_why() -> None:
    controller, cluster, gateways, _ = world(2, {})
    gateways.report = gateway(queued=50)
    controller.reconcile(REF.namespace, REF.name)
    status = tick(controller, cluster)
    assert cluster.scale_writes == []
    conds = {cd["type"]: cd for cd in status["conditions"]}
    assert (conds["ScalingActive"]["status"], conds["ScalingActive"]["reason"]) == (
        "False",
        "OwnedExternally",
    )
    assert status["autoscaler"]["owner"] == "External"


def test_interactive_pressure_scales_up_and_labels_roles() -> None:
    controller, cluster, gateways, _ = world(
        2, {"minReplicas": 1, "maxReplicas": 8, "interactiveBackpressure": {"target": 0.5}}
    )
    controller.reconcile(REF.namespace, REF.name)
    # both full at cap 8 and 4 waiting: B 2.5 of 2, IBP 1.25 -> ceil(2.5 / 0.5) = 5
    gateways.report = gateway([backend("llama-0", M, 8), backend("llama-1", M, 8)], queued=4)
    status = tick(controller, cluster)
    assert cluster.scale_writes and cluster.scale_writes[-1] == 5
    roles = status["autoscaler"]["roles"]
    assert sum(roles.values()) == cluster.scale_writes[-1]
    tick(controller, cluster)  # pods created by the last tick get their labels now
    labelled = {
        p["metadata"]["name"]: p["metadata"]["labels"].get(c.LABEL_ROLE)
        for p in cluster.list_pods(REF.namespace, f"{c.LABEL_COMPONENT}={c.COMPONENT_WORKER}")
    }
    assert set(labelled.values()) <= {"interactive", "mixed", "batch"}
    assert None not in labelled.values()


@pytest.mark.parametrize(
    ("room", "wanted"), [(8, 5), (32, None)], ids=["halved-for-latency", "lowered-for-throughput"]
)
def test_a_cap_lowered_for_throughput_is_not_demand_for_instances(
    room: int, wanted: int | None
) -> None:
    """Both backends full at cap 8 with 4 waiting. Where 8 is all the batch that meets the
    ITL SLO, that is B 2.5 of 2: scale to ceil(2.5 / 0.5) = 5. Where the cap fell because
    a larger batch did not pay and 32 meet the SLO, it is B 0.625 of 2: no new instance."""
    controller, cluster, gateways, _ = world(
        2, {"minReplicas": 2, "maxReplicas": 8, "interactiveBackpressure": {"target": 0.5}}
    )
    controller.reconcile(REF.namespace, REF.name)
    full = [backend(f"llama-{i}", M, 8).model_copy(update={"batch_room": room}) for i in (0, 1)]
    gateways.report = gateway(full, queued=4)
    status = tick(controller, cluster)
    assert cluster.scale_writes[-1:] == ([wanted] if wanted else [])
    ibp = (8 / room * 2 + 4 / room) / 2
    assert f"IBP {ibp:.2f}" in status["autoscaler"]["reason"]


def test_watch_event_reconciles_do_not_tick() -> None:
    controller, cluster, gateways, _ = world(1, {"minReplicas": 1, "maxReplicas": 4})
    for _ in range(3):
        controller.reconcile(REF.namespace, REF.name)
    assert gateways.asked == 0
    assert status_reason(cluster) == "waiting for the first autoscaler tick"
    tick(controller, cluster)
    assert gateways.asked == 1
    events = len(cluster.events)
    controller.reconcile(REF.namespace, REF.name)  # reuses the tick's facts, tells nothing
    assert gateways.asked == 1 and len(cluster.events) == events


def status_reason(cluster: FakeCluster) -> str:
    body = cluster.get_md(REF.namespace, REF.name)
    assert body is not None
    return str(body["status"]["autoscaler"]["reason"])


@pytest.mark.parametrize("owner", ["External", None])
def test_external_scenario_under_heavy_load_never_writes(owner: str | None) -> None:
    scaling: dict[str, Any] = {"minReplicas": 2, "maxReplicas": 2 if owner is None else 8}
    if owner:
        scaling["autoscaler"] = owner
    controller, cluster, gateways, clock = world(2, scaling)
    for step in range(20):
        gateways.report = gateway(queued=step * 10)
        tick(controller, cluster)
        clock.t += 15
    assert cluster.scale_writes == []


def test_kubectl_scale_down_removes_the_least_loaded_pods() -> None:
    controller, cluster, gateways, _ = world(3, {})
    controller.reconcile(REF.namespace, REF.name)
    gateways.report = gateway(
        [backend("llama-0", M, 4), backend("llama-1", M, 0), backend("llama-2", M, 7)]
    )
    body = cluster.get_md(REF.namespace, REF.name)
    assert body is not None
    body["spec"]["replicas"] = 2  # kubectl scale
    body["metadata"]["generation"] = 2
    controller.reconcile(REF.namespace, REF.name)
    assert worker_pods(cluster) == ["llama-0", "llama-2"]


def test_a_tick_that_scales_down_picks_its_victims_from_its_own_gateway_read() -> None:
    scaling = {
        "minReplicas": 1,
        "maxReplicas": 4,
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
    }
    controller, cluster, gateways, clock = world(3, scaling)
    controller.reconcile(REF.namespace, REF.name)
    assert worker_pods(cluster) == ["llama-0", "llama-1", "llama-2"]
    # One request in flight on llama-2 only: the policy wants one instance, and the
    # pods to give up are the two idle ones, as the tick's read of the gateway says.
    gateways.report = gateway(
        [backend("llama-0", M, 0), backend("llama-1", M, 0), backend("llama-2", M, 1)]
    )
    clock.t += 30
    tick(controller, cluster)
    assert cluster.scale_writes == [1]
    assert worker_pods(cluster) == ["llama-2"]
    assert gateways.asked == 1  # the scale-down did not ask the gateways again
