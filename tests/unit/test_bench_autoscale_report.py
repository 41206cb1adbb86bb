"""`cascade bench autoscale`'s rows, goals, prediction error, document, table and PNG,
from synthetic runs (no cluster); and the simulator's prediction on a tiny load."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cascade_bench.autoscale import compare, document, manifest, predict, report, workload
from cascade_bench.autoscale.timeline import Sample
from cascade_bench.replay.scale import Scaling
from cascade_sim.profile import CapacityProfile, CurvePoint


def _cls(requests: int, met: int, ttft_met: int, completed: int, p99: float) -> dict[str, Any]:
    return {
        "requests": requests,
        "completed": completed,
        "rejected_429": 1,
        "errors": requests - completed - 1,
        "error_kinds": {"timeout": requests - completed - 1},
        "ttft_s": {"p99": p99},
        "slo": {"attainment": met / requests, "ttft_met": ttft_met, "met": met},
    }


def _replay(att: float = 0.9, wall: float = 10.0) -> dict[str, Any]:
    n = 100
    return {
        "wall_s": wall,
        "send_lag_s": {"p99": 0.01},
        "slo": {"interactive": {"ttft_s": 5.0, "itl_s": 0.25}, "batch": {"ttft_s": 60.0}},
        "classes": {
            "interactive": _cls(n, round(att * n), 95, 98, 3.0),
            "batch": _cls(20, 20, 20, 20, 10.0) | {"rejected_429": 0, "errors": 0},
            "all": {},
        },
        "records": [
            {"scheduled_s": 1.0, "class": "interactive", "ttft_s": 1.0, "error": None},
            {"scheduled_s": 2.0, "class": "interactive", "ttft_s": 7.0, "error": None},
            {"scheduled_s": 3.0, "class": "interactive", "ttft_s": None, "error": "http 429"},
            {"scheduled_s": 31.0, "class": "batch", "ttft_s": 9.0, "error": None},
        ],
    }


def _samples(pods: int) -> list[Sample]:
    return [Sample(float(t), pods, pods, pods) for t in range(0, 11)]


def test_a_run_row_has_the_issue_keys_and_the_bill() -> None:
    row = compare.run_row(_replay(0.9), _samples(3))
    assert row["slo_attainment"] == {"interactive": 0.9, "batch": 1.0}
    assert row["ttft_p99_s"]["interactive"] == 3.0
    assert row["instance_seconds"] == pytest.approx(30.0)
    assert row["rejected"] == 1 and row["errors"] == 1
    assert row["ttft_met"]["batch"] == 20 and row["scalings"] == 0
    json.dumps(row)


def _rows(
    cas: tuple[float, int], fmax: tuple[float, int], kpa: tuple[float, int]
) -> dict[str, Any]:
    return {
        name: compare.run_row(_replay(att, 10.0), _samples(pods))
        for name, (att, pods) in (("cascade", cas), ("fixed_max", fmax), ("kpa", kpa))
    }


def _holds(goals: list[dict[str, Any]]) -> list[bool | None]:
    return [g["holds"] for g in goals]


def test_goals_pass_when_cascade_is_cheap_and_close() -> None:
    runs = _rows(cas=(0.93, 3), fmax=(0.97, 6), kpa=(0.80, 3))
    sims = {"cascade": {"slo_attainment": {"interactive": 0.90}, "instance_seconds": 33.0}}
    assert _holds(compare.goals(runs, sims)) == [True, True, True, True, True, True]
    sims["cascade"]["slo_attainment"] = {"interactive": 0.87}  # 6 points off: over 5
    assert _holds(compare.goals(runs, sims))[4] is False


def test_goals_fail_with_the_distance_said() -> None:
    runs = _rows(cas=(0.80, 5), fmax=(0.97, 6), kpa=(0.85, 4))
    sims = {"cascade": {"slo_attainment": {"interactive": 0.60}, "instance_seconds": 40.0}}
    goals = compare.goals(runs, sims)
    assert _holds(goals) == [False, False, False, True, False, False]
    assert "-17.0 pts" in goals[0]["detail"] and "83.3%" in goals[1]["detail"]
    assert "-20.0 pts" in goals[4]["detail"] and "-20.0%" in goals[5]["detail"]


@pytest.mark.parametrize(
    ("cascade", "holds"),
    [
        ((0.90, 3), True),  # cheaper at equal attainment
        ((0.90, 4), True),  # equal: not more instance-seconds
        ((0.89, 3), True),  # a point lower counts as equal, and it is cheaper
        ((0.90, 5), False),  # more instance-seconds at equal attainment
        ((0.91, 5), True),  # a point better pays for more
        ((0.88, 3), False),  # two points worse, however cheap
    ],
)
def test_against_the_kpa_no_more_instance_seconds_unless_a_point_better(
    cascade: tuple[float, int], holds: bool
) -> None:
    goals = compare.goals(_rows(cascade, (0.9, 6), (0.9, 4)), None)
    assert goals[2]["holds"] is holds


def test_missing_runs_leave_goals_undecided() -> None:
    goals = compare.goals({}, None)
    assert len(goals) == 6 and set(_holds(goals)) == {None}


def test_ttft_bins_count_misses_and_failures() -> None:
    bins = document.ttft_bins(_replay()["records"], {"interactive": 5.0, "batch": 60.0})
    first = bins[0]
    assert (first["t"], first["class"], first["requests"]) == (0.0, "interactive", 3)
    assert first["ttft_met"] == pytest.approx(1 / 3)
    assert first["ttft_p99_s"] == pytest.approx(1.0 + 0.99 * 6.0)
    assert bins[1]["class"] == "batch" and bins[1]["ttft_met"] == 1.0


PROFILE = CapacityProfile((CurvePoint(1, 50.0), CurvePoint(8, 200.0)), "m", 0.2)


def _load(tmp_path: Path) -> workload.Load:
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    rows += [f"2023-11-16 18:00:{s:02d}.000,400,16" for s in range(0, 60, 2)]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(rows) + "\n")
    return workload.build(path, Scaling(), workload.RateChoice(2.0), PROFILE, 0.25, 8)


def _doc(tmp_path: Path) -> dict[str, Any]:
    load = _load(tmp_path)
    base = manifest.BASE_SPEC
    sims = predict.predict(load.arrivals, base, PROFILE, manifest.RUNS, 5.0, None)
    raw = {
        name: {
            "spec": manifest.run_spec(base, name),
            "replay": _replay(0.9 if name != "fixed_min" else 0.2),
            "samples": _samples(6 if name == "fixed_max" else 3),
            "time_to_ready_s": [12.0],
            "deploy_ready": (2, 9.0),
            "nodes_used": 3,
            "pods_seen": 3,
            "host_busy_cores": 1.2,
            "kpa_decisions": [] if name == "kpa" else None,
            "loop_errors": [],
        }
        for name in manifest.RUNS
    }
    cfg = SimpleNamespace(
        per_request=False, base_spec=base, kpa_target=None, profile=Path("p.json"),
        peak_utilization=0.5, scaling=Scaling(), kpa_window_s=60.0, timeout_s=600.0,
    )  # fmt: skip
    cluster = {"nodes": 8, "node_cpu": 0.2, "gpus_per_instance": 8, "brought_up": True}
    conf = predict.sim_config(5.0, "given", None, 12.0)
    return document.build(cfg, raw, load, PROFILE, sims, conf, cluster, 1.0)


def test_the_simulator_predicts_every_run_on_the_same_arrivals(tmp_path: Path) -> None:
    load = _load(tmp_path)
    sims = predict.predict(load.arrivals, manifest.BASE_SPEC, PROFILE, manifest.RUNS, 5.0, None)
    assert list(sims) == list(manifest.RUNS)
    for d in sims.values():
        assert d["requests"]["interactive"] + d["requests"]["batch"] == len(load.arrivals)
        assert 0 <= d["slo_attainment"]["interactive"] <= 1
        assert d["instances"] and d["instance_seconds"] > 0
        assert d["timeline"] and {"queued_interactive", "mean_cap"} <= set(d["timeline"][0])
        bins = [b for b in d["ttft_bins"] if b["class"] == "interactive"]
        assert sum(b["requests"] for b in bins) == d["requests"]["interactive"]
    assert sims["fixed_max"]["peak_instances"] == 6 and sims["fixed_min"]["peak_instances"] == 1


def test_document_table_and_png_come_from_the_runs(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(_doc(tmp_path)))  # what --json writes reads back the same
    for name in manifest.RUNS:
        run = doc["runs"][name]
        assert set(run["slo_attainment"]) == {"interactive", "batch"}
        assert {"instance_seconds", "errors", "rejected", "ttft_p99_s"} <= set(run)
        assert 0 <= run["slo_attainment"]["interactive"] <= 1
    assert doc["choices"]["slo"]["interactive"] == {"ttft_s": 5.0, "itl_s": 0.25}
    assert doc["choices"]["kpa"]["target"] == pytest.approx(0.7 * 16)
    assert set(doc["simulate"]["error"]) == set(manifest.RUNS)
    text = report.table(doc)
    assert "sim cascade" in text and "fixed_min" in text
    assert "interactive TTFT met, from" in text  # per 30 s, each run beside the simulator
    assert "[PASS] <= 60 % of fixed_max's instance-seconds" in text
    assert "time to ready 5.0 s (given); the runs' scale-ups measured 12.0 s" in text
    out = tmp_path / "a.png"
    report.plot(doc, out)
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_a_dry_runs_png_draws_every_simulated_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cluster rows: the load, instances and tails come from the simulated runs."""
    import matplotlib.figure

    doc = json.loads(json.dumps(_doc(tmp_path)))
    doc["runs"] = {}
    drawn: dict[str, set[str]] = {}
    save = matplotlib.figure.Figure.savefig

    def keep(fig: matplotlib.figure.Figure, *args: Any, **kwargs: Any) -> None:
        drawn["lines"] = {str(line.get_label()) for ax in fig.axes for line in ax.get_lines()}
        drawn["bars"] = {str(p.get_label()) for ax in fig.axes for p in ax.containers}
        save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    report.plot(doc, tmp_path / "dry.png")
    assert {f"{name} simulated" for name in manifest.RUNS} <= drawn["lines"]
    assert {"interactive", "simulated"} <= drawn["bars"]


def test_the_simulators_time_to_ready_is_known_before_the_replays() -> None:
    """Given wins; else the first run's deploy, timed before its replay; never the
    scale-ups the replays measured (the check would be fed its own answer)."""
    assert predict.ready_before_replay(7.0, [(2, 9.0)]) == (7.0, "given (--time-to-ready)")
    ready, source = predict.ready_before_replay(None, [(0, 0.0), (2, 9.0), (6, 14.0)])
    assert ready == 9.0 and "2 instance(s)" in source
    default = predict.ready_before_replay(None, [])
    assert default[0] == predict.DEFAULT_TIME_TO_READY_S
