"""Per-node results to per-method summaries: slowest receiver, medians, ratios."""

from __future__ import annotations

import pytest

from cascade_bench.results import NodeResult, summarize_methods, summarize_run


def node(
    name: str, done: float | None, arrivals: dict[int, float], missing: tuple[int, ...] = ()
) -> NodeResult:
    return NodeResult.from_json(
        {
            "node": name,
            "complete_s": done,
            "block_arrivals": {str(k): v for k, v in arrivals.items()},
            "missing": list(missing),
            "bytes_received": 100,
        }
    )


def test_from_json_accepts_string_block_keys() -> None:
    r = node("a", 2.0, {0: 1.0, 1: 1.5})
    assert r.block_arrivals == {0: 1.0, 1: 1.5}
    assert r.complete and r.whole_model_s(2) == 1.5


def test_whole_model_falls_back_to_completion_without_arrivals() -> None:
    assert node("a", 2.0, {}).whole_model_s(4) == 2.0
    assert node("a", None, {0: 1.0}).whole_model_s(1) is None
    assert node("a", 2.0, {0: 1.0}, missing=(1,)).whole_model_s(2) is None


def test_run_takes_the_slowest_expected_receiver() -> None:
    results = [
        node("src", 0.1, {}),
        node("r1", 4.0, {0: 2.0, 1: 3.9}),
        node("r2", 5.0, {0: 2.5, 1: 4.8}),
    ]
    run = summarize_run(results, ["r1", "r2"], nblocks=2)
    assert run.completion_s == 5.0
    assert run.first_model_s == 4.8
    assert run.per_node_s == {"r1": 4.0, "r2": 5.0}
    assert run.bytes_received == 200
    assert run.error is None


def test_run_with_a_missing_or_incomplete_receiver_is_unfinished() -> None:
    results = [node("r1", 4.0, {0: 3.0}), node("r2", 5.0, {0: 4.0}, missing=(1,))]
    run = summarize_run(results, ["r1", "r2", "r3"], nblocks=1)
    assert run.completion_s is None and run.first_model_s is None
    assert run.error == "receivers did not finish: r2, r3"
    assert summarize_run([], ["r1"], 1, error="boom").error == "boom"


def test_methods_median_ratio_and_speedup() -> None:
    def run(t: float | None) -> list[NodeResult]:
        return [node("r", t, {0: t} if t else {})]

    runs = {
        "chain": [summarize_run(run(t), ["r"], 1) for t in (9.0, 8.5, 10.0)],
        "unicast": [summarize_run(run(t), ["r"], 1) for t in (56.0, 57.0, 55.0)],
        "gloo": [summarize_run(run(None), ["r"], 1)],
    }
    out = summarize_methods(runs, bound_s=8.0)
    assert out["chain"].completion_s == 9.0
    assert out["chain"].ratio == pytest.approx(9.0 / 8.0)
    assert out["chain"].speedup_vs_unicast == pytest.approx(56.0 / 9.0)
    assert out["unicast"].speedup_vs_unicast == pytest.approx(1.0)
    assert out["gloo"].completion_s is None and out["gloo"].ratio is None
    assert len(out["chain"].to_json()["runs"]) == 3
