"""`cascade bench burst`'s pure parts: the burst window and its rate, the mode specs,
first-token and transfer-window detection from probe rounds, the per-mode metrics and
the document's keys (the JSON is an interface: issue 11's acceptance reads it)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cascade_bench.burst import metrics, modes, report, timeline, workload
from cascade_bench.burst.timeline import Round, WorkerSample
from cascade_bench.replay.record import RequestRecord
from cascade_bench.replay.scale import INTERACTIVE, Scaling
from cascade_bench.replay.trace import Trace, parse_trace
from cascade_sim.profile import CapacityProfile, CurvePoint

# Decode 200 tok/s from batch 8 on, prefill at the decode peak (no measured prefill):
# a 100-token prompt and 20 outputs cost 100/200 + 20/200 = 0.6 s at batch 16 (whose
# step, 80 ms, meets a 250 ms ITL SLO).
PROFILE = CapacityProfile((CurvePoint(1, 50.0), CurvePoint(8, 200.0)), "m", 0.2)
COST_S = 0.6
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def trace() -> Trace:
    """300 s: a request every 5 s, and 100 more in [200, 220) s (3 instances' worth)."""
    offsets = [5.0 * i for i in range(60)] + [200.1 + 0.2 * i for i in range(100)]
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens\n"]
    lines += [f"{(T0 + timedelta(seconds=t)).isoformat()},1000,20\n" for t in sorted(offsets)]
    return parse_trace(lines, "synthetic.csv")


def test_busiest_window_respects_its_bounds_and_takes_the_first_of_ties() -> None:
    at = [0.0, 1.0, 2.0, 10.0, 10.5, 11.0, 30.0]
    costs = [1.0] * len(at)
    assert workload.busiest_window(at, costs, 2.0, 0.0, 100.0) == (10.0, 3.0)
    assert workload.busiest_window(at, costs, 5.0, 0.0, 100.0) == (0.0, 3.0)  # tie: first
    assert workload.busiest_window(at, costs, 2.0, 12.0, 100.0) == (30.0, 1.0)
    with pytest.raises(ValueError, match="no request"):
        workload.busiest_window(at, costs, 2.0, 31.0, 100.0)


def test_the_burst_is_the_busiest_window_scaled_to_its_multiple() -> None:
    scaling = Scaling(batch_fraction=0.0)
    shape = workload.Shape(warmup_s=30.0, burst_s=20.0, warmup_x=0.5, burst_x=2.0)
    load = workload.build(trace(), scaling, shape, PROFILE, 0.25, 16)
    d = load.doc
    assert d["window_rule"] == "busiest" and d["burst_start_trace_s"] == pytest.approx(200.0)
    assert d["demand_batch"] == 16
    # At K = 1 the window holds 100 dense + 4 sparse requests at 0.6 s over 20 s.
    assert d["burst"]["demand_at_1x"] == pytest.approx(104 * COST_S / 20)
    # K about 2 / that, refined so whole copies come closest to 2 instances.
    assert d["burst"]["rate_scale"] == pytest.approx(2.0 / d["burst"]["demand_at_1x"], rel=0.1)
    assert d["burst"]["demand"] == pytest.approx(2.0, rel=0.03)
    # The warm-up: 0.5 instance of steady load, 25 requests of 0.6 s every 1.2 s.
    assert d["warmup"]["demand"] == pytest.approx(0.5)
    warm = [p for p in load.planned if p.index >= workload.WARMUP_INDEX]
    assert [p.at_s for p in warm] == pytest.approx([1.2 * k for k in range(25)])
    # Send times: the warm-up first, then the burst from the scale decision on.
    assert (load.burst_at_s, load.burst_end_s) == (30.0, 50.0)
    assert min(p.at_s for p in load.planned) >= 0.0
    burst = [p for p in load.planned if p.at_s >= 30.0]
    assert len(burst) >= d["burst"]["sent_requests"]
    assert max(p.at_s for p in load.planned) < 50.0 + 1.0  # copies land within 1 s
    assert {p.request_class for p in load.planned} == {INTERACTIVE}
    assert len({p.index for p in load.planned}) == len(load.planned)  # distinct prompts


def test_a_given_burst_start_is_taken_as_it_is() -> None:
    shape = workload.Shape(warmup_s=10.0, burst_s=20.0, burst_start=0.0)
    load = workload.build(trace(), Scaling(batch_fraction=0.0), shape, PROFILE, 0.25, 16)
    assert load.doc["window_rule"] == "given" and load.doc["burst_start_trace_s"] == 0.0
    assert load.doc["burst"]["trace_requests"] == 4  # a request every 5 s


def test_each_mode_patches_the_base_spec() -> None:
    specs = {m: modes.mode_spec(modes.BASE_SPEC, m, 4, gpus=8) for m in modes.MODES}
    live = {
        m: (s["liveScaling"].get("enabled"), s["liveScaling"].get("cooperative"))
        for m, s in specs.items()
    }
    assert live == {
        "stop_the_world": (False, None),
        "pipelines": (True, False),
        "cooperative": (True, True),
        "all_cached": (False, None),
        "prescaled": (False, None),
    }
    assert [specs[m]["replicas"] for m in modes.MODES] == [1, 1, 1, 1, 4]
    assert specs["all_cached"]["multicast"]["fromPeers"] is False
    assert all("fromPeers" not in specs[m]["multicast"] for m in modes.MODES if m != "all_cached")
    assert {s["scaling"]["autoscaler"] for s in specs.values()} == {"External"}
    assert modes.BASE_SPEC.get("liveScaling") is None  # the base is not changed
    assert modes.ttft_slo_s(specs["pipelines"]) == 5.0
    assert modes.transfer_bound_s(specs["pipelines"], 6_000_000) == pytest.approx(8.0)
    with pytest.raises(ValueError, match="unknown mode"):
        modes.mode_spec(modes.BASE_SPEC, "warp", 4)


def ws(t: float, pod: str, **kw: object) -> WorkerSample:
    return WorkerSample(t=t, pod=pod, **kw)  # type: ignore[arg-type]


ROUNDS = [
    Round(9.0, (ws(9.0, "a", mode="local", running=8, generated=100.0),)),
    Round(10.5, (ws(10.5, "a", mode="local", running=8, generated=150.0),
                 ws(10.6, "b", mode="loading", phase="transferring", blocks_loaded=1,
                    blocks_total=4, generated=0.0))),
    Round(12.0, (ws(12.0, "a", mode="local", running=8, generated=200.0),
                 ws(12.1, "b", mode="head", head=True, running=3, blocks_loaded=2,
                    blocks_total=4, generated=0.0))),
    Round(13.0, (ws(13.0, "a", mode="local", running=8, stage=(2, 4), generated=260.0),
                 ws(13.2, "b", mode="head", head=True, running=4, blocks_loaded=3,
                    blocks_total=4, generated=5.0))),
    Round(16.0, (ws(16.0, "a", mode="local", running=6, generated=300.0),
                 ws(16.1, "b", mode="local", running=5, blocks_loaded=4, blocks_total=4,
                    generated=40.0))),
]  # fmt: skip


def test_first_new_token_is_the_first_counter_of_a_new_pod_after_the_decision() -> None:
    first = timeline.first_new_token(ROUNDS, {"a"}, 10.0)
    assert first == {"t": 13.2, "pod": "b", "after_t": 12.1, "source": "metrics"}
    # The status rule (head/local with requests running) answers earlier: admitted, not
    # yet a token.
    assert timeline.first_new_serving(ROUNDS, {"a"}, 10.0) == (12.1, "b")
    # Without counters the status rule stands in.
    bare = [
        Round(r.t, tuple(WorkerSample(**{**w.__dict__, "generated": None}) for w in r.workers))
        for r in ROUNDS
    ]
    assert timeline.first_new_token(bare, {"a"}, 10.0) == {
        "t": 12.1, "pod": "b", "after_t": None, "source": "status",
    }  # fmt: skip
    # Nothing new before the decision counts; no new pod: none.
    assert timeline.first_new_token(ROUNDS, {"a"}, 20.0) is None
    assert timeline.first_new_token(ROUNDS, {"a", "b"}, 10.0) is None


def test_weights_and_plan_windows() -> None:
    assert timeline.weights_window(ROUNDS, {"a"}, 10.0) == (10.6, 16.1)
    assert timeline.weights_window(ROUNDS[:3], {"a"}, 10.0) == (10.6, None)
    plans = [{"start_t": 10.0, "end_t": 19.0}, {"start_t": 11.0, "end_t": None}]
    assert timeline.plan_window(plans) == (10.0, None)
    assert timeline.plan_window(plans[:1]) == (10.0, 19.0)
    assert timeline.plan_window([]) == (None, None)


def test_plan_sample_moves_api_times_onto_the_bench_clock() -> None:
    wall0 = T0.timestamp()
    body = {
        "metadata": {"name": "p1"},
        "spec": {"targets": ["b"], "executionPipelines": [
            {"stages": [{"pod": "b"}, {"pod": "a"}], "readySeconds": 2.5}]},
        "status": {"phase": "Succeeded", "startTime": "2024-01-01T00:00:10Z",
                   "completionTime": "2024-01-01T00:00:20Z",
                   "pipelines": [{"head": "b", "state": "Dissolved", "coveredSeconds": 3.0}]},
    }  # fmt: skip
    p = timeline.plan_sample(body, wall0)
    assert (p["start_t"], p["end_t"], p["targets"]) == (10.0, 20.0, ["b"])
    assert p["planned_pipelines"] == [{"head": "b", "ready_s": 2.5}]
    text = "# HELP x\ncascade_worker_generated_tokens_total 42.0\ncascade_worker_up 1.0\n"
    assert timeline.parse_generated(text) == 42.0
    assert timeline.parse_generated("cascade_worker_up 1.0\n") is None


def rec(
    i: int, at: float, ttft: float | None, tokens: int = 4, error: str | None = None
) -> RequestRecord:
    r = RequestRecord(i, INTERACTIVE, at, 10, tokens)
    r.sent_s = at
    if ttft is not None:
        r.token_times = [at + ttft + 0.1 * k for k in range(tokens)]
        r.usage_tokens = tokens
    r.end_s = at + (ttft or 0.0) + 0.1 * tokens
    r.done, r.error = error is None, error
    return r


def raw(ttfts: list[float | None], rounds: list[Round] = ROUNDS) -> metrics.ModeRaw:
    records = [rec(0, 1.0, 0.2), rec(1, 2.0, 0.3)]  # warm-up
    records += [
        rec(10 + i, 10.0 + i, t, error=None if t is not None else "http 500: x")
        for i, t in enumerate(ttfts)
    ]
    wall = max(r.end_s or 0 for r in records)
    return metrics.ModeRaw({}, records, wall, rounds, ["a"], 10.0, True, 10.2, T0.timestamp(), [])


JUDGE = metrics.Judge(burst_t=(10.0, 20.0), ttft_slo_s=5.0, step_s=0.08, period_s=0.5)


def test_mode_metrics_from_synthetic_records() -> None:
    d = metrics.mode_doc(raw([1.0, 2.0, 3.0, 8.0, None]), JUDGE)
    assert d["requests"] == 5 and d["completed"] == 4 and d["errors"] == 1
    assert d["error_kinds"] == {"http 500": 1}
    assert d["ttft_p50_s"] == pytest.approx(2.5)
    assert d["ttft_p99_s"] == pytest.approx(3.0 + 0.97 * 5.0)
    assert d["slo_attainment"] == pytest.approx(3 / 5)  # the failure is a miss
    assert d["warmup_ttft_s"]["p50"] == pytest.approx(0.25)
    assert d["first_new_token_s"] == pytest.approx(3.2)
    assert d["first_new_serving_s"] == pytest.approx(2.1)
    assert d["scale_write_s"] == pytest.approx(0.2)
    assert d["series"][12]["queue"] >= 1  # request 12 waits 3 s for its first token


def test_the_share_goal_reads_the_plan_from_its_start() -> None:
    plan = {
        "name": "p", "start_t": 11.0, "end_t": 20.0,
        "pipelines": [{"head": "b", "coveredSeconds": 1.8}], "planned_pipelines": [],
    }  # fmt: skip
    first = {"t": 13.2, "pod": "b"}
    check = metrics.share_check(first, [plan], JUDGE)
    assert check is not None
    assert check["from_plan_start_s"] == pytest.approx(2.2)
    assert check["bound_s"] == pytest.approx(1.88)
    assert check["holds"]  # within the probe's half second
    late = metrics.share_check({"t": 14.0, "pod": "b"}, [plan], JUDGE)
    assert late is not None and not late["holds"]
    assert metrics.share_check(first, [], JUDGE) is None


def test_the_document_has_the_issues_keys_and_ratios(tmp_path: Path) -> None:
    stw, live = raw([4.0, 6.0, 8.0, 10.0]), raw([1.0, 2.0, 2.0, 3.0])
    runs = {"stop_the_world": stw, "pipelines": live, "cooperative": live,
            "all_cached": live, "prescaled": raw([0.5, 0.5, 0.6, 0.7])}  # fmt: skip
    choices = {
        "cluster": {"nodes": 4, "node_cpu": 0.2, "gpus_per_instance": 8},
        "scale_to": 4, "model_uri": "file:///m", "model_bytes": 7_000_000,
        "multicast": {"strategy": "chain", "blocks": 4, "rateMbit": 6},
        "transfer_bound_s": 9.3,
    }  # fmt: skip
    load = workload.build(
        trace(), Scaling(batch_fraction=0.0), workload.Shape(30.0, 20.0), PROFILE, 0.25, 16
    ).doc
    doc = report.document(choices, load, runs, JUDGE, False, 1.0)
    json.dumps(doc)  # serialisable as it is
    for m in modes.MODES:
        assert {"ttft_p50_s", "ttft_p99_s", "first_new_token_s", "slo_attainment", "errors"} <= set(
            doc["modes"][m]
        )
    ratios = doc["comparison"]["ttft_p99_vs_stop_the_world"]
    assert ratios["stop_the_world"] == 1.0
    assert ratios["pipelines"] == pytest.approx(
        doc["modes"]["pipelines"]["ttft_p99_s"] / doc["modes"]["stop_the_world"]["ttft_p99_s"]
    )
    assert doc["comparison"]["cooperative_vs_all_cached"]["ttft_p99_ratio"] == 1.0
    goals = {g["goal"]: g["holds"] for g in doc["goals"]}
    assert goals["pipelines: burst P99 TTFT <= 0.5 x stop_the_world"] is True
    text = report.table(doc)
    assert "stop_the_world" in text and "[PASS]" in text
    from cascade_bench.burst.plot import plot

    plot(doc, tmp_path / "burst.png")
    assert (tmp_path / "burst.png").stat().st_size > 0


def test_only_the_scale_ups_plans_count() -> None:
    made_before = {"name": "p0", "start_t": -11.0, "end_t": -1.0}
    pending = {"name": "p1", "start_t": None, "end_t": None}
    started = {"name": "p1", "start_t": 10.5, "end_t": None}
    rounds = [Round(0.0, plans=(made_before, pending)), Round(11.0, plans=(made_before, started))]
    assert metrics.final_plans(rounds, 10.0) == [started]
    assert metrics.final_plans(rounds[:1], 10.0) == [pending]


def test_the_cli_puts_host_copies_rate_and_blocks_in_the_base_spec() -> None:
    from cascade_cli.bench_burst import _spec

    args = argparse.Namespace(
        model_uri=None, rate_mbit=8, blocks=4, host_copies=3, ttft_slo_s=2.5, queue_order="FIFO"
    )
    spec = _spec(args)
    assert spec["hostCopies"] == 3 and spec["multicast"]["rateMbit"] == 8
    assert spec["slo"]["interactive"]["ttftMs"] == 2500 and spec["slo"]["queueOrder"] == "FIFO"
    assert modes.BASE_SPEC["hostCopies"] == 1  # the base is copied, not changed
