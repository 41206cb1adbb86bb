"""`cascade bench autoscale`'s pure parts: the KPA tick, the samples' bill and scaling
log, each run's manifest, the scaled load."""

from __future__ import annotations

from pathlib import Path

import pytest

from cascade_bench.autoscale import kpa, manifest, workload
from cascade_bench.autoscale.cluster import mismatch
from cascade_bench.autoscale.timeline import (
    Sample,
    instance_seconds,
    mean_and_peak,
    scaling_events,
    serving_view,
    times_to_ready,
)
from cascade_bench.replay.scale import BATCH, INTERACTIVE, Planned, Scaling
from cascade_protocol.gateway_load import BackendLoad, ClassLoad, GatewayLoad
from cascade_sim.profile import CapacityProfile, CurvePoint

CFG = kpa.KpaConfig(target=10, min_replicas=1, max_replicas=6, window_s=60)


def _tick(
    state: kpa.KpaState, t: float, conc: float, cur: int
) -> tuple[kpa.KpaDecision, kpa.KpaState]:
    return kpa.decide(CFG, state, t, conc, cur)


def test_kpa_wants_ceil_of_concurrency_over_target() -> None:
    assert kpa.want(0, 10) == 0
    assert kpa.want(10, 10) == 1  # exactly the target: one, not two
    assert kpa.want(10.5, 10) == 2
    assert kpa.want(0.7 * 32 * 3, 0.7 * 32) == 3  # float division does not round up


def test_kpa_scales_up_at_once_and_down_only_after_the_window() -> None:
    s = kpa.KpaState()
    d, s = _tick(s, 0, 5, 2)
    assert (d.replicas, d.write) == (2, False)  # wants 1, the 2 found count for 60 s
    d, s = _tick(s, 2, 45, 2)
    assert (d.replicas, d.write) == (5, True)  # up at once
    d, s = _tick(s, 4, 0, 5)
    assert (d.replicas, d.write) == (5, False)  # 45 in flight 2 s ago still counts
    assert "within 60 s" in d.reason
    d, s = _tick(s, 61.9, 0, 5)
    assert d.replicas == 5  # t=2 is still inside (61.9 - 60, 61.9]
    d, s = _tick(s, 62.1, 0, 5)
    assert (d.replicas, d.write) == (1, True)  # forgotten: down to minReplicas
    assert "bounded" in d.reason


def test_kpa_forgets_the_initial_count_after_the_window() -> None:
    d, s = _tick(kpa.KpaState(), 0, 0, 4)
    assert (d.replicas, d.write) == (4, False)
    d, s = _tick(s, 59, 0, 4)
    assert d.replicas == 4
    d, s = _tick(s, 60, 0, 4)
    assert (d.replicas, d.write) == (1, True)


def test_kpa_first_tick_holds_the_initial_count_when_it_wants_as_much() -> None:
    d, _ = _tick(kpa.KpaState(), 0, 15, 2)
    assert (d.replicas, d.write) == (2, False)


def test_kpa_clamps_to_max_and_rejects_bad_config() -> None:
    d, _ = _tick(kpa.KpaState(), 0, 1000, 3)
    assert (d.replicas, d.write) == (6, True)
    with pytest.raises(ValueError):
        kpa.KpaConfig(target=0, min_replicas=1, max_replicas=2)
    with pytest.raises(ValueError):
        kpa.KpaConfig(target=1, min_replicas=3, max_replicas=2)


def _s(t: float, pods: int, replicas: int | None = None, ready: tuple[str, ...] = ()) -> Sample:
    return Sample(t, pods if replicas is None else replicas, pods, len(ready), ready_pods=ready)


def test_instance_seconds_hold_each_sample_until_the_next() -> None:
    samples = [_s(0.2, 2), _s(1.2, 3), _s(2.2, 3), _s(3.2, 1)]
    # 2 from 0 (the first sample reaches back to the start) to 1.2, 3 until 3.2, 1 to 4.
    assert instance_seconds(samples, 0.0, 4.0) == pytest.approx(2 * 1.2 + 3 * 2.0 + 1 * 0.8)
    assert instance_seconds(samples, 1.0, 2.0) == pytest.approx(2 * 0.2 + 3 * 0.8)
    assert instance_seconds([], 0, 10) == 0.0
    assert instance_seconds(samples, 5, 5) == 0.0
    mean, peak = mean_and_peak(samples, 0.0, 4.0)
    assert mean == pytest.approx((2.4 + 6 + 0.8) / 4)
    assert peak == 3


def test_scaling_events_are_replica_changes() -> None:
    samples = [_s(0, 2, 2), _s(1, 2, 5), _s(2, 5, 5), _s(3, 5, 3), _s(4, 3, 3)]
    assert scaling_events(samples) == [
        {"t": 1, "from": 2, "to": 5},
        {"t": 3, "from": 5, "to": 3},
    ]


def test_times_to_ready_count_pods_created_in_the_run() -> None:
    samples = [
        _s(0, 2, ready=("a", "b")),
        _s(5, 3, ready=("a", "b")),
        _s(9, 3, ready=("a", "b", "c")),
    ]
    created = {"a": -1.0, "b": -1.0, "c": 4.0, "d": 6.0}  # d never got ready
    assert times_to_ready(created, samples) == [5.0]


def _backend(ready: bool, cap: int, running: int, waiting: int, in_flight: int) -> BackendLoad:
    return BackendLoad(
        url="http://w", ready=ready, draining=False, in_flight=in_flight, running=running,
        waiting=waiting, max_batch=cap, kv_cache_usage=0.0, tokens_per_s=0.0,
    )  # fmt: skip


def test_a_sample_carries_the_gateways_queues_and_each_routable_backend() -> None:
    load = GatewayLoad(
        model="m", deployment="d", draining=False, backends_total=3, backends_ready=2,
        tokens_per_s=0.0,
        classes={
            "interactive": ClassLoad(queued=7, in_flight=30, queue_limit=256),
            "batch": ClassLoad(queued=2, in_flight=4, queue_limit=4096),
        },
        backends=[_backend(True, 32, 30, 2, 33), _backend(True, 4, 4, 0, 1),
                  _backend(False, 1, 0, 0, 0)],
    )  # fmt: skip
    view = serving_view(load)
    assert view == {
        "queued_interactive": 7,
        "queued_batch": 2,
        "in_flight": 34,
        "mean_cap": 18.0,
        "backends": [[32, 30, 2, 33], [4, 4, 0, 1]],
    }
    doc = Sample(3.0, 2, 3, 2, serving=view).to_json()
    assert doc["queued_interactive"] == 7 and doc["pods"] == 3
    assert "queued_interactive" not in Sample(3.0, 2, 3, 2).to_json()  # the gateway was silent


def test_a_cluster_fits_with_enough_nodes_at_the_quota() -> None:
    assert mismatch([0.2] * 8, 8, 0.2) is None
    assert mismatch([0.2] * 8, 6, None) is None
    assert "nodes" in (mismatch([0.2] * 4, 8, 0.2) or "")
    assert "quota" in (mismatch([0.5] * 8, 8, 0.2) or "")
    assert "quota" in (mismatch([None] * 8, 8, 0.2) or "")


def test_each_run_gets_its_owner_count_and_engine() -> None:
    base = manifest.BASE_SPEC
    cas = manifest.run_spec(base, "cascade", gpus_per_node=4)
    assert cas["scaling"]["autoscaler"] == "Cascade"
    assert cas["engine"]["adaptiveBatch"] is True
    assert cas["instance"]["gpus"] == 4 and cas["replicas"] == base["replicas"]
    fmax = manifest.run_spec(base, "fixed_max")
    assert fmax["scaling"]["autoscaler"] == "External" and fmax["replicas"] == 6
    assert fmax["engine"]["adaptiveBatch"] is False
    assert manifest.run_spec(base, "fixed_min")["replicas"] == 1
    local = manifest.run_spec(base, "fixed_local")  # fixed_max with the local controller
    assert local["scaling"]["autoscaler"] == "External" and local["replicas"] == 6
    assert local["engine"]["adaptiveBatch"] is True
    assert "fixed_local" not in manifest.RUNS  # run only when asked for
    k = manifest.run_spec(base, "kpa")
    assert k["scaling"]["autoscaler"] == "External" and k["replicas"] == 2
    assert base["scaling"].get("autoscaler") is None  # the base is not changed
    assert manifest.md_name("fixed_max") == "autoscale-fixed-max"
    body = manifest.body("ns", "kpa", k)
    assert body["metadata"] == {"name": "autoscale-kpa", "namespace": "ns"}
    with pytest.raises(ValueError):
        manifest.run_spec(base, "hpa")


def test_manifest_needs_max_replicas_and_valid_bounds() -> None:
    spec = {**manifest.BASE_SPEC, "scaling": {"minReplicas": 1}}
    with pytest.raises(ValueError, match="maxReplicas"):
        manifest.bounds(spec)
    assert manifest.bounds(manifest.BASE_SPEC) == (1, 6)
    dep = manifest.deployment(manifest.run_spec(manifest.BASE_SPEC, "cascade"))
    assert dep.max_replicas == 6 and dep.engine_max_batch == 16
    assert dep.slos["interactive"].ttft_s == 5.0


def test_the_bench_runs_the_products_scaling_policy() -> None:
    """No knob of the policy is the bench's: auto Θ and the HPA's default behavior."""
    scaling = manifest.BASE_SPEC["scaling"]
    assert set(scaling) == {"minReplicas", "maxReplicas"}
    parsed = manifest.validate(manifest.run_spec(manifest.BASE_SPEC, "cascade"))
    assert parsed.scaling.interactive_backpressure.target is None


PROFILE = CapacityProfile((CurvePoint(1, 50.0), CurvePoint(8, 200.0)), "m", 0.2)


def _trace(tmp_path: Path) -> Path:
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(120):  # 2 per second for a minute, then 1 every 2 s for a minute
        sec = i // 2 if i < 120 else 0
        rows.append(f"2023-11-16 18:00:{sec % 60:02d}.{(i % 2) * 5}00,1000,20")
    for i in range(30):
        rows.append(f"2023-11-16 18:01:{2 * i:02d}.000,1000,20")
    path = tmp_path / "t.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_load_is_scaled_so_the_busiest_minute_needs_the_peak(tmp_path: Path) -> None:
    s = Scaling(batch_fraction=0.25)
    load = workload.build(_trace(tmp_path), s, workload.RateChoice(3.0), PROFILE, 0.05, 8)
    d = load.doc
    assert d["demand_batch"] == 8  # 8 / 200 tok/s = 40 ms per step <= 50 ms
    # cost per request: 100 / 200 + 20 / 200 = 0.6 s; busiest minute 120 x 0.6 / 60 = 1.2
    assert d["peak_instances_demand_at_1x"] == pytest.approx(1.2)
    assert d["rate_scale"] == pytest.approx(2.5)
    assert d["peak_instances_demand"] == pytest.approx(3.0, rel=0.1)
    assert len(load.planned) == len(load.arrivals) == d["sent_requests"]
    assert len({p.index for p in load.planned}) == len(load.planned)  # copies differ
    assert sum(d["sent_classes"].values()) == len(load.planned)
    for p, a in zip(load.planned, load.arrivals, strict=True):
        assert p.index % workload.COPY_STRIDE == a.index
        assert p.at_s == a.at_s and (p.request_class == BATCH) == a.batch


def test_a_given_rate_scale_wins_and_one_leaves_the_trace_alone(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    one = workload.build(path, Scaling(), workload.RateChoice(None, 1.0), PROFILE, None, 8)
    assert one.doc["rate_rule"] == "given" and len(one.planned) == 150
    half = workload.build(path, Scaling(), workload.RateChoice(6.0, 0.5), PROFILE, None, 8)
    assert half.doc["rate_scale"] == 0.5 and 50 < len(half.planned) < 100
    with pytest.raises(ValueError, match="no request"):
        workload.build(path, Scaling(start_s=500), workload.RateChoice(3), PROFILE, None, 8)


def test_the_profile_is_measured_at_the_windows_mean_prompt(tmp_path: Path) -> None:
    path = _trace(tmp_path)  # 1000 context tokens x 0.1, clamped to 512: 100
    assert workload.mean_prompt_tokens(path, Scaling()) == 100
    assert workload.mean_prompt_tokens(path, Scaling(context_scale=1.0)) == 512
    with pytest.raises(ValueError, match="no request"):
        workload.mean_prompt_tokens(path, Scaling(start_s=500))


def test_copies_get_their_own_index() -> None:
    p = Planned(7, 1.0, 10, 5, INTERACTIVE, 100, 5)
    arrivals = workload.to_arrivals([p])
    out = workload.to_planned([arrivals[0], arrivals[0]], [p])
    assert [q.index for q in out] == [7, 7 + workload.COPY_STRIDE]
