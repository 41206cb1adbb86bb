"""`cascade bench capacity`'s pure parts: ITL from chunk times, windows, knee, table."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cascade_bench.capacity.report import document, plot, table
from cascade_bench.capacity.stats import (
    CurvePoint,
    Window,
    curve_point,
    itl_samples,
    knee,
    per_instance,
    prefill_point,
    ratio,
    split,
    superlinear,
    tokens_in,
    without_prefill,
)


def test_first_chunk_is_prefill_and_multi_token_chunks_split_per_token() -> None:
    stream = [(0.0, 1), (0.5, 1), (0.6, 2), (0.9, 1)]
    assert itl_samples(stream, Window(0.0, 10.0)) == pytest.approx([0.5, 0.05, 0.05, 0.3])


def test_only_chunks_arriving_inside_the_window_count() -> None:
    stream = [(0.0, 1), (1.0, 1), (2.0, 1), (3.0, 1)]
    w = Window(1.5, 3.0)  # end is exclusive
    assert itl_samples(stream, w) == [1.0]
    assert tokens_in(stream, w) == 1


def test_decreasing_times_are_refused() -> None:
    with pytest.raises(ValueError):
        itl_samples([(1.0, 1), (0.5, 1)], Window(0.0, 2.0))


def test_curve_point_rate_over_the_window_not_over_the_requests() -> None:
    # two streams, one token every 0.1 s from t=0; a 1 s window from t=1 holds 10 each
    streams = [[(i / 10, 1) for i in range(40)] for _ in range(2)]
    p = curve_point(2, streams, finished=[3.9, 3.9], window=Window(1.0, 2.0))
    assert p.tokens == 20
    assert p.tokens_per_s == pytest.approx(20.0)
    assert p.itl_p50_s == pytest.approx(0.1)
    assert p.itl_p90_s == pytest.approx(0.1)
    assert p.itl_mean_s == pytest.approx(0.1)
    assert p.requests_done == 0
    with pytest.raises(ValueError):
        curve_point(1, streams, [], Window(1.0, 1.0))


def test_the_decode_speed_leaves_out_the_prefill_of_requests_started_in_the_window() -> None:
    # Four requests start inside a 10 s window (first token there), one before it.
    streams = [[(t, 1), (t + 0.5, 1)] for t in (0.5, 2.0, 4.0, 6.0, 8.0)]
    p = curve_point(2, streams, finished=[], window=Window(1.0, 11.0))
    assert p.started == 4 and p.tokens == 9
    # 100-token prompts at 200 tok/s: 2 s of the window went to prefill.
    d = without_prefill(p, prompt_tokens=100, prefill_tokens_per_s=200.0)
    assert d.tokens_per_s == pytest.approx(9 / 8) and d.raw_tokens_per_s == pytest.approx(0.9)
    with pytest.raises(ValueError, match="--max-tokens"):
        without_prefill(p, prompt_tokens=1000, prefill_tokens_per_s=200.0)  # 20 s of 10


def test_a_point_mostly_prefill_is_left_out_of_the_profile_not_the_run() -> None:
    from cascade_bench.capacity.run import _decode_only

    def point(batch: int, started: int) -> CurvePoint:
        return CurvePoint(batch, 10.0, None, None, None, 100, 0, 10.0, started=started)

    said: list[str] = []
    out = _decode_only([point(1, 2), point(64, 40)], 100, {"tokens_per_s": 200.0}, said.append)
    assert [p.batch for p in out] == [1] and out[0].tokens_per_s == pytest.approx(100 / 9)
    assert any("left out of the profile: batch 64" in line for line in said)
    with pytest.raises(ValueError, match="no batch size"):
        _decode_only([point(64, 40)], 100, {"tokens_per_s": 200.0}, said.append)


def test_curve_point_with_no_itl_sample() -> None:
    p = curve_point(1, [[(0.5, 1)]], [], Window(0.0, 1.0))
    assert (p.tokens, p.itl_p50_s, p.itl_mean_s) == (1, None, None)


def _pt(batch: int, tps: float) -> CurvePoint:
    return CurvePoint(batch, tps, 0.01, 0.02, 0.012, int(tps * 10), 3, 10.0)


def test_knee_is_the_smallest_batch_near_the_best() -> None:
    curve = [_pt(1, 100), _pt(2, 180), _pt(4, 300), _pt(8, 470), _pt(16, 500), _pt(32, 505)]
    assert knee(curve) == 8
    assert knee(curve, fraction=1.0) == 32
    with pytest.raises(ValueError):
        knee([])


def test_ratio_and_split() -> None:
    assert ratio(400.0, 780.0) == pytest.approx(1.95)
    assert ratio(0.0, 5.0) is None
    assert split(16, 2) == [8, 8]
    assert split(5, 2) == [3, 2]
    with pytest.raises(ValueError):
        split(4, 0)


def _doc() -> dict[str, object]:
    params = {"max_tokens": 64, "prompt_tokens": 16, "duration_s": 12.0, "warmup_s": 4.0}
    curve = [_pt(1, 100), _pt(8, 470)]
    return document(
        node_cpu=0.5,
        model="tiny-llama",
        params=params,
        curve=curve,
        prefill=prefill_point(512, [0.5, 0.4, 0.6]),
        one=_pt(16, 480),
        two=_pt(16, 950),
        scaling_ratio=ratio(480, 950),
    )


def test_document_keys_are_the_simulator_contract() -> None:
    doc = json.loads(json.dumps(_doc()))
    assert doc["node_cpu"] == 0.5 and doc["model"] == "tiny-llama"
    for key in ("batch", "tokens_per_s", "itl_p50_s", "itl_p90_s"):
        assert key in doc["curve"][0]
    assert doc["prefill"]["tokens_per_s"] == pytest.approx(512 / 0.5)
    s = doc["scaling"]
    assert (s["one"], s["two"]) == (480, 950)
    assert s["ratio"] == pytest.approx(950 / 480)
    assert s["passed"] is True


def test_table_shows_curve_and_verdict() -> None:
    text = table(_doc())
    assert "node CPU 0.5 core" in text
    assert "470.0" in text and "10.0" in text  # tokens/s, ITL p50 in ms
    assert "ratio two/one = 1.979 (>= 1.8: pass)" in text
    assert "prefill: 1024 tok/s (512-token prompts, time to first token p50 500.0 ms" in text


def test_prefill_point_is_prompt_tokens_over_the_median_ttft() -> None:
    got = prefill_point(256, [0.2, 0.25, 0.9])
    assert got["tokens_per_s"] == pytest.approx(256 / 0.25)
    assert (got["samples"], got["ttft_max_s"]) == (3, 0.9)
    with pytest.raises(ValueError, match="prefill"):
        prefill_point(256, [])


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "cap.png"
    plot(_doc(), out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_per_instance_share_keeps_itl() -> None:
    total = replace(_pt(8, 900), started=60)
    one = per_instance(total, 6)
    assert one.tokens_per_s == pytest.approx(150)
    assert (one.batch, one.itl_p50_s) == (total.batch, total.itl_p50_s)
    # Each instance prefilled its own 10 of the 60 starts, not all of them.
    assert one.started == 10
    alone = without_prefill(replace(one, window_s=10.0), 180, 1800.0)
    assert alone.tokens_per_s == pytest.approx(one.tokens / (10.0 - 10 * 180 / 1800.0))
    with pytest.raises(ValueError):
        per_instance(total, 0)


def test_an_at_scale_profile_keeps_the_one_instance_figures(tmp_path: Path) -> None:
    alone = {"curve": [{"batch": 1, "tokens_per_s": 120.0}], "prefill": {"tokens_per_s": 900}}
    doc = _doc()
    doc["params"]["instances"] = 6  # type: ignore[index]
    doc = {**doc, "one_instance": alone}
    assert "per instance, 6 instances with b requests in flight each:" in table(doc)
    pytest.importorskip("matplotlib")
    plot(doc, tmp_path / "cap.png")
    assert (tmp_path / "cap.png").stat().st_size > 0


def test_the_scaling_ratio_is_of_decode_speeds_on_both_sides() -> None:
    """The curve takes each window's prefill out; the 1-vs-2 ratio does the same, two
    instances prefilling side by side (each half the requests). Raw windows would
    credit the side that prefilled less."""
    one = replace(_pt(16, 480), started=40, tokens=480 * 12, window_s=12.0)
    two = replace(_pt(16, 900), started=80, tokens=900 * 12, window_s=12.0)
    rate = 400.0  # 16-token prompts: 40 starts = 1.6 s of one instance's window
    d1 = without_prefill(one, 16, rate)
    d2 = without_prefill(two, 16, rate, instances=2)
    assert d1.tokens_per_s == pytest.approx(480 * 12 / (12 - 1.6))
    assert d2.tokens_per_s == pytest.approx(900 * 12 / (12 - 80 * 16 / 800))
    assert d1.raw_tokens_per_s == 480 and d2.raw_tokens_per_s == 900


def test_two_instances_above_twice_one_are_a_defect_not_a_pass() -> None:
    doc = document(
        node_cpu=0.5, model="m", params={"max_tokens": 64, "prompt_tokens": 16,
        "duration_s": 12.0, "warmup_s": 4.0}, curve=[_pt(1, 100)],
        prefill=prefill_point(512, [0.5]), one=_pt(16, 400), two=_pt(16, 948),
        scaling_ratio=ratio(400, 948),
    )  # fmt: skip
    s = doc["scaling"]
    assert s["superlinear"] is True and s["passed"] is False
    assert "DEFECT" in table(doc)
    assert superlinear(2.0) is False and superlinear(None) is False
