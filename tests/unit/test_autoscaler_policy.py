"""The composed global policy, tick by tick, driven the way the operator will drive it.

`Sim` keeps the fleet and the policy's state: each tick it builds a context from the
load it is given, calls `decide`, and, when the recommendation says `write`, applies the
new count and roles at once (pods start instantly here) and calls `applied`. Every
recommendation of every scenario must carry a one-line reason and roles that sum to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from behavior_specs import behavior, percent, pods

from cascade_api.scaling import ScalingBehavior
from cascade_autoscaler.batch_queue import BatchQueueContext, QueuedBatchRequest
from cascade_autoscaler.batch_queue import decide as decide_batch
from cascade_autoscaler.interactive import auto_theta
from cascade_autoscaler.policy import (
    THETA_STEP,
    Arrivals,
    AutoscaleContext,
    AutoscaleSpec,
    AutoscaleState,
    Condition,
    Fleet,
    Load,
    Recommendation,
    Roles,
    applied,
    decide,
    split,
)

TICK = 15.0


NO_DOWN_WINDOW = behavior(scaleDown={"stabilizationWindowSeconds": 0})


def fleet(replicas: int, batch: int = 0, theta: float = 0.7) -> Fleet:
    rest = split(replicas - batch, replicas - batch, 0, theta)
    return Fleet(replicas, rest.interactive, rest.mixed, batch)


def queue(n: int, now: float, slo_s: float = 60.0) -> tuple[QueuedBatchRequest, ...]:
    return tuple(QueuedBatchRequest.with_slo(now, slo_s, 100, 1000) for _ in range(n))


def batch_ctx(
    now: float, instances: int, q: tuple[QueuedBatchRequest, ...] = (), running: int = 0
) -> BatchQueueContext:
    return BatchQueueContext(now, q, 100.0, instances, running, 200.0, 50.0)


@dataclass
class Sim:
    spec: AutoscaleSpec
    fleet: Fleet
    state: AutoscaleState = field(default_factory=AutoscaleState)
    writes: list[tuple[float, int, int]] = field(default_factory=list)

    def tick(
        self,
        now: float,
        demand: float = 0,
        *,
        q: tuple[QueuedBatchRequest, ...] = (),
        running: int = 0,
        last_arrival: float | None = None,
        arrivals: Arrivals | None = None,
    ) -> Recommendation:
        """`demand`: instances' worth of interactive work (IBP's B); beyond the fleet it
        waits at the gateway (one request per instance's worth, caps of 1)."""
        n = self.fleet.interactive + self.fleet.mixed
        waiting = max(0, math.ceil(demand - n - 1e-9))
        load = Load(float(demand), waiting, last_arrival_s=last_arrival)
        ctx = AutoscaleContext(
            now,
            self.spec,
            self.fleet,
            load,
            batch_ctx(now, self.fleet.batch, q, running),
            arrivals or Arrivals(),
        )
        rec, self.state = decide(ctx, self.state)
        assert rec.reason and "\n" not in rec.reason
        assert rec.roles.total == rec.replicas
        assert rec.write == (self.spec.owner == "cascade" and rec.replicas != self.fleet.replicas)
        if rec.write:
            before = self.fleet.replicas
            self.state = applied(
                self.state, before=before, after=rec.replicas, behavior=self.spec.behavior, now=now
            )
            self.writes.append((now, before, rec.replicas))
        if rec.write or self.spec.owner == "cascade":
            r = rec.roles
            self.fleet = Fleet(rec.replicas, r.interactive, r.mixed, r.batch)
        return rec

    def run(
        self, start: float, ticks: int, demand: float = 0, arrivals: Arrivals | None = None
    ) -> list[Recommendation]:
        return [self.tick(start + i * TICK, demand, arrivals=arrivals) for i in range(ticks)]


@pytest.mark.parametrize("busy", [6, 7, 8])
def test_steady_load_in_the_band_never_changes(busy: int) -> None:
    sim = Sim(AutoscaleSpec(1, 20), fleet(10))
    recs = sim.run(0.0, 200, demand=busy)
    assert sim.writes == []
    assert {r.replicas for r in recs} == {10}
    assert {r.roles for r in recs} == {Roles(7, 3, 0)}
    assert f"IBP {busy / 10:.2f} in [0.60, 0.80]: 10 interactive+mixed" in recs[-1].reason
    assert recs[-1].scaling_limited == Condition(False, "DesiredWithinRange")


def test_steady_load_out_of_the_band_acts_once_then_holds() -> None:
    sim = Sim(AutoscaleSpec(1, 20), fleet(10))
    recs = sim.run(0.0, 200, demand=9)  # IBP 0.9 > 0.8: ceil(9 / 0.7) = 13
    assert sim.writes == [(0.0, 10, 13)]
    assert recs[0].reason.startswith("IBP 0.90 > Θ+δ 0.80: 10 → 13 interactive+mixed")
    assert {r.replicas for r in recs} == {13}


def test_interactive_burst_scales_up_as_fast_as_behavior_allows() -> None:
    rules = behavior(scaleUp={"policies": [pods(2, 60)]})
    sim = Sim(AutoscaleSpec(1, 30, behavior=rules), fleet(4))
    first = sim.tick(0.0, demand=20)
    assert first.reason == (
        "IBP 5.00, 16 waiting > Θ+δ 0.80: 4 → 29 interactive+mixed; batch 0; "
        "ScaleUpLimit caps at 6; replicas 4 → 6"
    )
    assert first.scaling_limited == Condition(True, "ScaleUpLimit")
    assert first.able_to_scale == Condition(True, "ReadyForNewScale")
    assert first.scaling_active == Condition(True, "ValidMetricFound")
    counts = [sim.tick(t * TICK, demand=20).replicas for t in range(1, 17)]
    # +2 per 60 s: the period counts the writes made inside it (applied() records them)
    assert counts == [6, 6, 6, 8, 8, 8, 8, 10, 10, 10, 10, 12, 12, 12, 12, 14]
    assert [w[2] - w[1] for w in sim.writes] == [2] * 5


def test_saturated_burst_reaches_its_level_as_fast_as_default_behavior_allows() -> None:
    sim = Sim(AutoscaleSpec(1, 100), fleet(2))
    counts = [r.replicas for r in sim.run(0.0, 9, demand=40)]
    # B 40 (waiting requests included) wants ceil(40 / 0.7) = 58 at once; the default
    # scale-up rule, max(100 %, 4 pods) per 15 s, lets it double each tick; at 58 IBP is
    # 0.69, in the band: hold
    assert counts == [6, 12, 24, 48, 58, 58, 58, 58, 58]
    assert all(r.scaling_limited.status is False for r in sim.run(150.0, 3, demand=40))


def test_batch_queue_adds_batch_instances_then_retires_them() -> None:
    sim = Sim(AutoscaleSpec(1, 20), fleet(2))
    q = queue(30, 0.0)
    want = decide_batch(batch_ctx(0.0, 0, q), AutoscaleSpec(1, 20).batch_config).desired_instances
    assert want >= 2
    rec = sim.tick(0.0, demand=1, q=q)  # IBP 0.5 with 2: already the fewest
    assert rec.replicas == 2 + want and rec.write
    assert rec.roles == Roles(1, 1, want)
    assert f"batch 0 → {want} (BBP 1)" in rec.reason
    # the queue drains into running requests: batch instances stay while they run
    for t in range(1, 5):
        rec = sim.tick(t * TICK, demand=1, running=10)
        assert rec.roles == Roles(1, 1, want) and not rec.write
    # all done: batch roles go at once, the pods only after the scale-down window
    done = 5 * TICK
    recs = [sim.tick(done + i * TICK, demand=1) for i in range(25)]
    assert all(r.roles.batch == 0 for r in recs)
    assert recs[0].roles == split(2 + want, 2 + want, 0, 0.7)  # the surplus splits by Θ
    assert recs[0].able_to_scale == Condition(True, "ScaleDownStabilized")
    shrink = next(i for i, r in enumerate(recs) if r.replicas == 2)
    assert done + shrink * TICK == 4 * TICK + 300  # last recommendation of more + window
    assert recs[-1].roles == Roles(1, 1, 0)


def test_capped_count_serves_interactive_first() -> None:
    sim = Sim(AutoscaleSpec(1, 3), fleet(2))
    rec = sim.tick(0.0, demand=1, q=queue(30, 0.0))
    assert rec.replicas == 3 and rec.roles == Roles(1, 1, 1)
    assert rec.scaling_limited == Condition(True, "TooManyReplicas")
    assert split(6, 5, 3, 0.7) == Roles(3, 2, 1)
    assert split(10, 5, 3, 0.7) == Roles(4, 3, 3)
    assert split(4, 5, 3, 0.7) == Roles(2, 2, 0)


@pytest.mark.parametrize(("rules", "zero_at"), [(NO_DOWN_WINDOW, 180.0), (None, 465.0)])
def test_keep_alive_reaches_zero_only_after_the_window(
    rules: ScalingBehavior | None, zero_at: float
) -> None:
    spec = AutoscaleSpec(0, 10, keep_alive_s=120, behavior=rules or ScalingBehavior())
    sim = Sim(spec, fleet(2))
    recs = [sim.tick(t * TICK, demand=1 if t * TICK <= 60 else 0) for t in range(60)]
    first_zero = next(i for i, r in enumerate(recs) if r.replicas == 0) * TICK
    assert first_zero == zero_at  # last request at 60 s + keep-alive (+ down window)
    before = recs[: int(first_zero / TICK)]
    assert all(r.replicas >= 1 for r in before)
    assert "keep-alive: idle 30s of 120s, keep ≥ 1" in recs[6].reason
    assert "idle 120s ≥ keep-alive 120s: to zero" in recs[12].reason
    assert all(r.replicas == 0 and not r.write for r in recs[int(first_zero / TICK) + 1 :])


def test_an_arrival_between_ticks_restarts_the_keep_alive() -> None:
    spec = AutoscaleSpec(0, 10, keep_alive_s=120, behavior=NO_DOWN_WINDOW)
    sim = Sim(spec, fleet(1))
    counts = [
        sim.tick(t * TICK, last_arrival=100.0 if t * TICK >= 105 else None).replicas
        for t in range(20)
    ]
    # a fresh state starts the clock at its first tick (0 s); the arrival at 100 s moves it
    assert counts.index(0) * TICK == 225.0  # first tick at or after 100 + 120


def test_min_replicas_holds_however_long_the_idle() -> None:
    sim = Sim(AutoscaleSpec(1, 10, keep_alive_s=60), fleet(3))
    recs = sim.run(0.0, 200)
    assert min(r.replicas for r in recs) == 1 and recs[-1].replicas == 1
    assert not any("zero" in r.reason for r in recs)
    assert recs[-1].scaling_limited == Condition(True, "TooFewReplicas")


def test_a_request_at_zero_scales_up_at_once() -> None:
    spec = AutoscaleSpec(0, 10, keep_alive_s=60, behavior=NO_DOWN_WINDOW)
    sim = Sim(spec, fleet(0))
    sim.run(0.0, 100)  # long idle at zero: no keep-alive wait on the way up
    assert sim.writes == []
    rec = sim.tick(1500.0, demand=1)
    assert rec.write and rec.replicas == 1  # start one; IBP takes over once it runs
    assert "1 interactive waiting at 0 → 1 interactive+mixed" in rec.reason
    assert "request at zero: at least 1 now" in rec.reason


@pytest.mark.parametrize(
    "rules",
    [
        behavior(scaleUp={"policies": [percent(100, 15)]}),  # 0 x 200 % is 0
        behavior(scaleUp={"selectPolicy": "Disabled"}),
        behavior(scaleUp={"stabilizationWindowSeconds": 120}),  # the window remembers 0
    ],
    ids=["percent-only", "disabled", "up-window"],
)
def test_a_request_at_zero_gets_one_whatever_the_behavior(rules: ScalingBehavior) -> None:
    sim = Sim(AutoscaleSpec(0, 10, behavior=rules), fleet(0))
    sim.run(0.0, 4)
    rec = sim.tick(60.0, demand=1)
    assert rec.write and rec.replicas == 1 and rec.roles == Roles(0, 1, 0)
    assert rec.scaling_limited == Condition(True, "ScaleFromZero")
    assert "ScaleFromZero: 0 → 1" in rec.reason


def test_a_batch_request_at_zero_starts_a_batch_instance() -> None:
    sim = Sim(AutoscaleSpec(0, 10), fleet(0))
    rec = sim.tick(0.0, q=queue(1, 0.0))
    assert rec.write and rec.replicas == 1 and rec.roles == Roles(0, 0, 1)


def test_zero_with_min_replicas_is_scaling_disabled() -> None:
    sim = Sim(AutoscaleSpec(2, 10), fleet(0))
    recs = sim.run(0.0, 10, demand=5)
    assert all(r.replicas == 0 and not r.write for r in recs)
    assert recs[0].scaling_active == Condition(False, "ScalingDisabled")
    assert "ScalingDisabled: at 0 with minReplicas 2, paused" in recs[0].reason


def test_max_replicas_bounds_every_tick() -> None:
    sim = Sim(AutoscaleSpec(1, 5), fleet(1))
    recs = sim.run(0.0, 40, demand=50)
    assert max(r.replicas for r in recs) == 5 and recs[-1].replicas == 5
    assert recs[-1].scaling_limited == Condition(True, "TooManyReplicas")
    assert "TooManyReplicas caps at 5" in recs[-1].reason


def test_external_owner_never_writes_over_a_whole_scenario() -> None:
    spec = AutoscaleSpec(0, 8, keep_alive_s=60, behavior=NO_DOWN_WINDOW)
    ext, own = Sim(replace(spec, owner="external"), fleet(2)), Sim(spec, fleet(2))
    recs: list[tuple[Recommendation, Recommendation]] = []
    for t in range(80):
        now = t * TICK
        if t == 40:  # someone runs `kubectl scale --replicas 0`
            ext.fleet = own.fleet = fleet(0)
        kw: dict[str, Any] = {"demand": 12 if t < 10 else 0, "q": queue(8, now) if t == 20 else ()}
        recs.append((ext.tick(now, **kw), own.tick(now, **kw)))
        own.fleet = ext.fleet  # same observations for both: the external owner's fleet
    assert not any(e.write for e, _ in recs) and ext.writes == []
    assert sum(o.write for _, o in recs) >= 3  # Cascade would have written several times
    for e, o in recs:
        assert e.reason.endswith("; owner External: not written")
        assert e.reason.removesuffix("; owner External: not written") == o.reason
        assert (e.replicas, e.roles, e.scaling_limited) == (o.replicas, o.roles, o.scaling_limited)


def test_auto_theta_moves_only_by_a_step() -> None:
    spec = AutoscaleSpec(1, 20, theta="auto")
    sim = Sim(spec, fleet(10))
    assert sim.tick(0.0, demand=7).theta == 0.7  # no history: the fallback
    calm = Arrivals((10, 12, 9, 11, 10, 11, 9, 12), 10.0, 30.0)
    est = auto_theta(calm.counts, 10.0, 30.0).theta
    assert abs(est - 0.7) >= THETA_STEP
    rec = sim.tick(TICK, demand=7, arrivals=calm)
    assert rec.theta == est and f"(auto Θ {est:.2f})" in rec.reason
    nudged = Arrivals((10, 12, 9, 11, 10, 11, 9, 13), 10.0, 30.0)
    assert 0 < abs(auto_theta(nudged.counts, 10.0, 30.0).theta - est) < THETA_STEP
    rec = sim.tick(2 * TICK, demand=7, arrivals=nudged)
    assert rec.theta == est and "keeping Θ" in rec.details[0]


def test_context_rejects_a_batch_count_other_than_the_fleets() -> None:
    with pytest.raises(ValueError, match="batch context"):
        AutoscaleContext(0.0, AutoscaleSpec(1, 4), fleet(2, batch=1), Load(0), batch_ctx(0.0, 0))
    with pytest.raises(ValueError):
        AutoscaleSpec(3, 2)


# Scale-down with the product's defaults (auto Θ, the HPA's default behavior: a 300 s
# scale-down stabilization window, 100 % a 15 s period): the cases a bench run showed,
# where a load needing ~2 of 6 instances kept all 6 for the whole window.
CALM = Arrivals((10, 12, 9, 11, 10, 11, 9, 12), 10.0, 30.0)
DOWN_WINDOW = 300.0


def test_a_load_needing_two_of_six_for_minutes_comes_down_within_the_window() -> None:
    sim = Sim(AutoscaleSpec(1, 6, theta="auto"), fleet(6))
    recs = sim.run(0.0, 40, demand=1.5, arrivals=CALM)  # 10 minutes
    theta = recs[-1].theta
    want = math.ceil(1.5 / theta)
    assert want <= 2  # what the load needs at the auto Θ of calm arrivals
    assert all(t >= DOWN_WINDOW for t, before, after in sim.writes if after < before)
    assert sim.writes and sim.writes[0][0] <= DOWN_WINDOW + TICK
    assert sim.fleet.replicas == want
    assert [r.replicas for r in recs[-10:]] == [want] * 10  # and it stays there


def test_a_spike_scales_up_at_once_and_the_count_returns_after_the_window() -> None:
    sim = Sim(AutoscaleSpec(1, 6, theta="auto"), fleet(2))
    sim.run(0.0, 8, demand=1.0, arrivals=CALM)  # two minutes at the level of 2
    assert sim.writes == []
    spike_at = 8 * TICK
    sim.run(spike_at, 4, demand=5.0, arrivals=CALM)  # one minute that needs ~6
    ups = [(t, a) for t, b, a in sim.writes if a > b]
    assert ups and ups[0][0] == spike_at  # the first tick of the spike
    assert max(a for _, a in ups) == 6
    calm_at = spike_at + 4 * TICK
    recs = sim.run(calm_at, 40, demand=1.0, arrivals=CALM)  # ten calm minutes
    downs = [t for t, b, a in sim.writes if a < b]
    assert downs and min(downs) >= spike_at + DOWN_WINDOW  # held through the window
    assert max(downs) <= calm_at + DOWN_WINDOW + 2 * TICK  # and not much longer
    assert recs[-1].replicas == sim.fleet.replicas <= 2
