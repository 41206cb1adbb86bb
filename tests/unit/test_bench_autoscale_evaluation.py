"""The autoscale bench's evaluation set: the window rule and the synthetic traces."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import pytest

from cascade_bench.autoscale import evaluation as ev
from cascade_bench.autoscale.synthetic import ArrivalProcess, arrival_times, synthetic_trace, to_csv
from cascade_bench.autoscale.windows import evaluation_windows, whole_windows
from cascade_bench.replay.trace import Trace, TraceRow, load_trace, parse_trace

SHARED = Path("/work/shared/traces/azure_llm_code_2023.csv")  # outside the repo: skipped if absent


def trace_of(offsets: list[float]) -> Trace:
    return Trace("t", tuple(TraceRow(i, t, 100 + i, 10 + i) for i, t in enumerate(offsets)))


def test_windows_are_whole_and_counted_from_the_first_arrival() -> None:
    # 0-10 s: 3 requests, 10-20 s: 1, 20-30 s: 5; 30-35 s is not a whole window.
    t = trace_of([0, 1, 2, 15, 21, 22, 23, 24, 25, 31, 35])
    assert whole_windows(t, 10) == [(0.0, 3), (10.0, 1), (20.0, 5)]


def test_the_rule_picks_the_busiest_median_and_quietest() -> None:
    t = trace_of([0, 1, 2, 15, 21, 22, 23, 24, 25, 31, 35])
    picks = evaluation_windows(t, 10)
    assert [(w.name, w.start_s, w.requests) for w in picks] == [
        ("busiest", 20.0, 5),
        ("median", 0.0, 3),
        ("quietest", 10.0, 1),
    ]
    assert picks[0].rate_per_s == 0.5


def test_ties_go_to_the_earlier_window_and_each_window_is_picked_once() -> None:
    assert [w.start_s for w in evaluation_windows(trace_of([1, 11, 21, 31]), 10)] == [0, 10, 20]
    assert [w.name for w in evaluation_windows(trace_of([1, 5, 15]), 10)] == ["busiest"]


def test_a_trace_shorter_than_a_window_is_an_error() -> None:
    with pytest.raises(ValueError, match="shorter than one 60 s window"):
        evaluation_windows(trace_of([0, 10, 20]), 60)
    with pytest.raises(ValueError, match="no requests"):
        evaluation_windows(Trace("empty", ()), 60)


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0, 4.0])
def test_gaps_have_the_asked_rate_and_burstiness(cv: float) -> None:
    times = arrival_times(ArrivalProcess(rate_per_s=20.0, cv=cv, duration_s=2000.0, seed=3))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) / 2000.0 == pytest.approx(20.0, rel=0.1 * cv)
    assert statistics.stdev(gaps) / statistics.fmean(gaps) == pytest.approx(cv, rel=0.15)
    assert all(0 <= t < 2000.0 for t in times) and times == sorted(times)


def test_one_seed_one_trace_and_lengths_come_from_the_source() -> None:
    source = trace_of([0, 1, 2, 3])
    process = ArrivalProcess(rate_per_s=5.0, cv=2.0, duration_s=60.0, seed=7)
    a, b = synthetic_trace(process, source), synthetic_trace(process, source)
    assert a == b and len(a.rows) > 100
    pairs = {(r.context_tokens, r.generated_tokens) for r in source.rows}
    assert {(r.context_tokens, r.generated_tokens) for r in a.rows} <= pairs
    other = synthetic_trace(ArrivalProcess(5.0, 2.0, 60.0, seed=8), source)
    assert [r.offset_s for r in other.rows] != [r.offset_s for r in a.rows]


def test_a_written_trace_reads_back_as_the_same_requests(tmp_path: Path) -> None:
    made = synthetic_trace(ArrivalProcess(3.0, 1.0, 30.0, seed=1), trace_of([0, 1]))
    path = tmp_path / "synthetic.csv"
    path.write_text(to_csv(made))
    back = load_trace(path)
    first = made.rows[0].offset_s  # the reader counts from the first arrival
    assert [(r.context_tokens, r.generated_tokens) for r in back.rows] == [
        (r.context_tokens, r.generated_tokens) for r in made.rows
    ]
    for got, want in zip(back.rows, made.rows, strict=True):
        assert got.offset_s == pytest.approx(want.offset_s - first, abs=1e-6)


def test_bad_processes_are_refused() -> None:
    with pytest.raises(ValueError, match="cv must be in"):
        arrival_times(ArrivalProcess(rate_per_s=1.0, cv=20.0, duration_s=10.0))
    with pytest.raises(ValueError, match="rate > 0"):
        arrival_times(ArrivalProcess(rate_per_s=0.0, cv=1.0, duration_s=10.0))
    with pytest.raises(ValueError, match="no rows"):
        synthetic_trace(
            ArrivalProcess(1.0, 1.0, 10.0),
            parse_trace(["TIMESTAMP,ContextTokens,GeneratedTokens"], "e"),
        )


@pytest.mark.skipif(not SHARED.is_file(), reason="the shared trace is not beside the repo")
def test_the_shared_trace_yields_three_distinct_eight_minute_windows() -> None:
    picks = evaluation_windows(load_trace(SHARED), 480.0)
    assert [w.name for w in picks] == ["busiest", "median", "quietest"]
    assert len({w.start_s for w in picks}) == 3
    assert picks[0].requests >= picks[1].requests >= picks[2].requests


def write_trace(path: Path, offsets: list[float]) -> Path:
    path.write_text(to_csv(trace_of(offsets)))
    return path


def test_window_cases_name_the_rule_and_refuse_what_it_cannot_pick(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.csv", [0, 1, 2, 15, 21, 22, 23, 24, 25, 31, 35])
    cases = ev.window_cases(path, 10, ("busiest", "quietest"))
    assert [(c.name, c.start_s, c.duration_s) for c in cases] == [
        ("busiest@20s", 20.0, 10),
        ("quietest@10s", 10.0, 10),
    ]
    assert "busiest of the trace's whole 10 s windows by requests (5" in cases[0].rule
    with pytest.raises(ValueError, match="not among"):
        ev.window_cases(path, 10, ("loudest",))
    with pytest.raises(ValueError, match="too few whole"):
        ev.window_cases(write_trace(tmp_path / "s.csv", [1, 5, 15]), 10, ("busiest", "median"))


def test_the_tuning_windows_are_every_window_the_evaluation_leaves(tmp_path: Path) -> None:
    # Five 10 s windows with 4, 1, 5, 2, 3 requests: busiest 20, median 40, quietest 10.
    offsets = [0, 1, 2, 3, 11, 21, 22, 23, 24, 25, 31, 32, 41, 42, 43, 51]
    path = write_trace(tmp_path / "t.csv", offsets)
    cases = ev.window_cases(path, 10, ("tuning",))
    assert [c.name for c in cases] == ["tuning@0s", "tuning@30s"]
    picked = {c.start_s for c in ev.window_cases(path, 10, ("busiest", "median", "quietest"))}
    assert picked == {20.0, 40.0, 10.0} and not picked & {c.start_s for c in cases}
    with pytest.raises(ValueError, match="too few whole"):  # three windows: none left over
        ev.window_cases(write_trace(tmp_path / "s.csv", [0, 1, 2, 15, 21, 22, 30]), 10, ("tuning",))


def test_synthetic_specs_parse_and_their_traces_are_written(tmp_path: Path) -> None:
    assert ev.parse_synthetic("poisson") == 1.0 and ev.parse_synthetic("gamma:2.5") == 2.5
    for bad in ("gamma", "gamma:x", "gamma:-1", "weibull:2"):
        with pytest.raises(ValueError, match="neither poisson nor gamma:CV"):
            ev.parse_synthetic(bad)
    lengths = write_trace(tmp_path / "t.csv", [float(i) for i in range(100)])
    cases = ev.synthetic_cases(["poisson", "gamma:4"], lengths, 60.0, 1, tmp_path / "out")
    assert [c.name for c in cases] == ["poisson", "gamma:4"]
    assert all(c.trace.is_file() and load_trace(c.trace).rows for c in cases)
    assert ev.file_name("busiest@480s") == "busiest-480s" and ev.file_name("gamma:4") == "gamma-4"


def row(att: float, cost: float) -> dict[str, object]:
    return {"slo_attainment": {"interactive": att}, "instance_seconds": cost}


def test_the_overall_row_reads_measured_runs_and_counts_judged_goals() -> None:
    doc = {
        "runs": {
            "cascade": row(0.99, 400.0),
            "fixed_max": row(1.0, 1000.0),
            "kpa": row(0.98, 500.0),
        },
        "simulate": {"runs": {"cascade": row(0.5, 1.0)}},
        "goals": [{"holds": True}, {"holds": False}, {"holds": None}],
    }
    got = ev.overall_row("busiest@480s", doc)
    assert got["source"] == "measured" and got["attainment"]["kpa"] == 0.98
    assert got["cascade_vs_fixed_max"] == 0.4 and got["cascade_vs_kpa"] == 0.8
    assert (got["goals_held"], got["goals_judged"]) == (1, 2)
    dry = ev.overall_row("poisson", {**doc, "runs": {}})
    assert dry["source"] == "simulated" and dry["attainment"]["fixed_max"] is None
    table = ev.overall_table({"overall": [got, dry]}).splitlines()
    assert table[2].split() == [
        "busiest@480s",
        "measured",
        "99.0",
        "100.0",
        "98.0",
        "0.40x",
        "0.80x",
        "1/2",
    ]
    assert table[3].split()[:3] == ["poisson", "simulated", "50.0"]
