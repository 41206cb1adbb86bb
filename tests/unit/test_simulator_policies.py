"""cascade_sim running the policies: time to ready, scale to zero and back, an External
owner, the KPA baseline tick by tick, the workload scalers, a 50+ instance ramp the
cluster cannot reach, and an hour of the real trace in seconds."""

from __future__ import annotations

import itertools
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_sim import policies
from cascade_sim.config import Deployment, SimConfig, from_spec
from cascade_sim.metrics import summarize
from cascade_sim.policies import KpaPolicy
from cascade_sim.profile import CapacityProfile, CurvePoint, from_document
from cascade_sim.sim import Result, simulate
from cascade_sim.view import InstanceView, View
from cascade_sim.workload import (
    Arrival,
    peak_demand,
    rate_scale_for_peak,
    replicate,
    speedup_for_peak,
)

TINY = CapacityProfile(
    tuple(CurvePoint(b, t) for b, t in ((1, 154.0), (8, 340.0), (32, 778.0), (128, 979.0)))
)
TRACE = Path("/work/shared/traces/azure_llm_code_2023.csv")  # outside the repo: skipped if absent


def deployment(**spec: Any) -> Deployment:
    doc: dict[str, Any] = {
        "model": {"uri": "file:///m"},
        "slo": {"interactive": {"ttftMs": 2000, "itlMs": 100}, "batch": {"ttftMs": 60000}},
    }
    doc.update(spec)
    return from_spec(ModelDeploymentSpec.model_validate(doc))


def run(arrivals: list[Arrival], dep: Deployment, name: str = "cascade", **cfg: Any) -> Result:
    return simulate(arrivals, dep, TINY, policies.make(name, dep), SimConfig(**cfg))


def steady(rate: float, seconds: float, prompt: int = 32, output: int = 256) -> list[Arrival]:
    n = int(rate * seconds)
    return [Arrival(i, i / rate, prompt, output, False) for i in range(n)]


def test_new_instances_serve_only_after_time_to_ready() -> None:
    dep = deployment(replicas=1, scaling={"minReplicas": 1, "maxReplicas": 6})
    res = run(steady(20.0, 120.0), dep, time_to_ready_s=30.0)
    assert res.events and res.events[0].after > res.events[0].before
    grown = [i for i in res.pool.all if i.created > 0]
    assert grown
    for inst in grown:
        assert inst.ready_at == pytest.approx(inst.created + 30.0)
        served = [r.dispatched for r in res.requests if r.instance == inst.iid]
        assert served and min(served) >= inst.ready_at


def test_scale_to_zero_after_keep_alive_and_back_for_a_held_request() -> None:
    dep = deployment(
        replicas=1,
        scaling={
            "minReplicas": 0,
            "maxReplicas": 2,
            "keepAliveSeconds": 10,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
        },
    )
    early = [Arrival(i, 0.5 * i, 8, 8, False) for i in range(4)]
    late = Arrival(99, 300.0, 8, 8, False)
    res = run([*early, late], dep, time_to_ready_s=20.0)
    to_zero = [e for e in res.events if e.after == 0]
    from_zero = [e for e in res.events if e.before == 0 and e.after == 1]
    assert to_zero and 10.0 <= to_zero[0].t <= 20.0
    assert from_zero and 300.0 <= from_zero[0].t <= 302.0
    held = next(r for r in res.requests if r.index == 99)
    assert held.ttft_s >= 20.0 and held.finished > held.first
    doc = summarize(res, dep.slos)
    assert doc["instance_seconds"] < 0.3 * doc["duration_s"]


def test_an_external_owner_is_never_scaled_and_keeps_no_roles() -> None:
    dep = deployment(
        replicas=2, scaling={"minReplicas": 1, "maxReplicas": 8, "autoscaler": "External"}
    )
    res = run(steady(40.0, 60.0), dep)
    assert not res.events
    assert len(res.pool.all) == 2 and {i.role for i in res.pool.all} == {"mixed"}
    assert summarize(res, dep.slos)["peak_instances"] == 2


def view(now: float, replicas: int, concurrency: int) -> View:
    """`replicas` ready instances with `concurrency` requests in flight on them."""
    ready = tuple(InstanceView("mixed", True, 0, 0) for _ in range(replicas))
    return View(
        now=now,
        replicas=replicas,
        instances=ready,
        draining_inflight=concurrency,
        queued_interactive=0,
        queued_batch=0,
        batch_queue=(),
        last_arrival_s=None,
        arrivals=(),
        arrival_interval_s=10.0,
        time_to_ready_s=20.0,
        output_mean=None,
        output_std=0.0,
        peak_tokens_per_s=None,
    )


def test_kpa_stable_window_panic_and_halving() -> None:
    kpa = KpaPolicy(min_replicas=0, max_replicas=100, replicas=2, target=10.0)
    assert kpa.tick(view(2.0, 2, 15)).replicas == 2  # 15 / 10 -> 2
    # A burst: the 6 s window averages 100, wants 10 >= 2 x 2 ready: panic.
    order = kpa.tick(view(4.0, 2, 185))
    assert order.write and order.replicas == 10 and "panic" in order.reason
    # Panic never scales down for 60 s, though the 6 s window is empty by now.
    assert kpa.tick(view(30.0, 10, 0)).replicas == 10
    # Out of panic with an idle stable window: at most halving per tick, down to zero.
    now, current, seen = 70.0, 10, []
    while current:
        current = kpa.tick(view(now, current, 0)).replicas
        seen.append(current)
        now += 2.0
    assert seen == [5, 2, 1, 0]


def test_replicate_scales_the_rate_and_keeps_the_shape() -> None:
    base = [Arrival(i, float(i), 10, 10, i % 5 == 0) for i in range(2000)]
    copies = replicate(base, 2.5, seed=3, batch_fraction=0.2)
    assert copies == replicate(base, 2.5, seed=3, batch_fraction=0.2)
    assert 4800 <= len(copies) <= 5200
    assert all(a.at_s <= b.at_s for a, b in itertools.pairwise(copies))
    assert max(a.at_s for a in copies) < 2000.0
    assert 0.17 <= sum(a.batch for a in copies) / len(copies) <= 0.23
    once = peak_demand(base, TINY, 64, 979.0)  # 1 request/s: a few hundredths of an instance
    k = rate_scale_for_peak(base, 5 * once, TINY, 64, 979.0)
    assert k == pytest.approx(5.0)
    assert peak_demand(replicate(base, k), TINY, 64, 979.0) == pytest.approx(5 * once, rel=0.1)
    s = speedup_for_peak(base, 3 * once, TINY, 64, 979.0)
    assert s == pytest.approx(3.0, rel=0.1)
    with pytest.raises(ValueError, match="instance-minutes"):
        speedup_for_peak(base, 1000 * once, TINY, 64, 979.0)


def ramp(peak_instances: float, seconds: float, seed: int = 1) -> list[Arrival]:
    """Poisson arrivals whose rate climbs from 10 % to a peak and back (a triangle)."""
    rng = random.Random(seed)
    prompt, output = 32, 512
    cost = prompt / TINY.peak_tokens_per_s + output / TINY.tokens_per_s(64)
    top = peak_instances / cost
    out: list[Arrival] = []
    t = 0.0
    while (t := t + rng.expovariate(top)) < seconds:
        rate = top * (0.1 + 0.9 * (1 - abs(t - seconds / 2) / (seconds / 2)))
        if rng.random() < rate / top:
            out.append(Arrival(len(out), t, prompt, output, rng.random() < 0.1))
    return out


@pytest.mark.slow  # about 8 s: 57k requests, 80 instances, their local autoscalers every 0.5 s
def test_fifty_plus_instances_cascade_meets_the_slo_for_less_than_fixed_max() -> None:
    """A 20-minute ramp to 55 instances of demand and back: the cascade policy follows
    it (peak >= 50) and meets the interactive SLO with fewer instance-seconds."""
    arrivals = ramp(55.0, 1200.0)
    dep = deployment(
        replicas=8,
        scaling={"minReplicas": 1, "maxReplicas": 80, "interactiveBackpressure": {"target": 0.8}},
    )
    cascade = summarize(run(arrivals, dep), dep.slos)
    fixed = summarize(run(arrivals, dep, "fixed_max"), dep.slos)
    assert cascade["peak_instances"] >= 50
    assert fixed["slo_attainment"]["interactive"] >= 0.99
    assert cascade["slo_attainment"]["interactive"] >= 0.95
    assert cascade["slo_attainment"]["batch"] >= 0.99
    assert cascade["instance_seconds"] < 0.85 * fixed["instance_seconds"]


@pytest.mark.skipif(not TRACE.exists(), reason="the Azure trace is not on this machine")
def test_an_hour_of_the_real_trace_costs_no_more_per_request_than_its_first_tenth() -> None:
    """The simulator stays linear in the trace: the cost per request of an hour is within
    3x of its first tenth's, measured in the same test (process CPU time, so a busy
    machine slows both alike and a neighbour's load is not counted)."""
    from cascade_bench.replay.scale import Scaling, schedule
    from cascade_bench.replay.trace import load_trace

    plan = schedule(load_trace(TRACE), Scaling())
    arrivals = [
        Arrival(p.index, p.at_s, p.prompt_tokens, p.output_tokens, p.request_class == "batch")
        for p in plan
    ]
    dep = deployment(replicas=2, scaling={"minReplicas": 1, "maxReplicas": 8})

    def cost_per_request(part: list[Arrival]) -> tuple[float, dict[str, Any]]:
        began = time.process_time()
        res = run(part, dep)
        return (time.process_time() - began) / len(part), summarize(res, dep.slos)

    tenth, _ = cost_per_request(arrivals[: len(arrivals) // 10])
    hour, doc = cost_per_request(arrivals)
    assert doc["duration_s"] > 3400 and sum(doc["requests"].values()) == len(arrivals) == 8819
    print(f"cost a request: {tenth * 1e3:.3f} ms (first tenth), {hour * 1e3:.3f} ms (hour)")
    assert hour < 3 * tenth, (
        f"{hour * 1e3:.2f} ms a request over the hour, {tenth * 1e3:.2f} in its first tenth"
    )
    json.dumps(doc)  # the document is JSON as is


def test_profile_document_round_trip_from_the_bench() -> None:
    doc = {"model": "tiny-llama", "node_cpu": 0.5, "curve": [], "scaling": {}}
    doc["curve"] = [{"batch": p.batch, "tokens_per_s": p.tokens_per_s} for p in TINY.points]
    assert from_document(doc).points == TINY.points
