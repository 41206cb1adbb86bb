"""Windowing, time compression, token scaling and class assignment; request bodies."""

from __future__ import annotations

import pytest

from cascade_bench.replay.prompts import (
    CLASS_HEADER,
    TokenRange,
    prompt_ids,
    request_body,
    request_headers,
)
from cascade_bench.replay.scale import (
    BATCH,
    INTERACTIVE,
    Planned,
    Scaling,
    describe,
    is_batch,
    scale_tokens,
    schedule,
)
from cascade_bench.replay.trace import Trace, TraceRow


def trace(n: int = 10) -> Trace:
    """Row i arrives at i seconds with 100*(i+1) context and 10*(i+1) generated tokens."""
    rows = tuple(TraceRow(i, float(i), 100 * (i + 1), 10 * (i + 1)) for i in range(n))
    return Trace("t.csv", rows)


def test_scale_tokens_rounds_half_up_and_clamps_to_one_and_max() -> None:
    assert scale_tokens(15, 0.1, 100) == 2  # 1.5 -> 2
    assert scale_tokens(14, 0.1, 100) == 1
    assert scale_tokens(3, 0.1, 100) == 1  # 0.3 -> 0 -> at least 1
    assert scale_tokens(0, 1.0, 100) == 1
    assert scale_tokens(5000, 0.1, 256) == 256


def test_window_speedup_and_cap() -> None:
    s = Scaling(start_s=2, duration_s=5, speedup=2, max_requests=3, batch_fraction=0)
    plan = schedule(trace(), s)
    assert [p.index for p in plan] == [2, 3, 4]  # [2, 7) capped at 3
    assert [p.at_s for p in plan] == [0.0, 0.5, 1.0]  # (offset - start) / speedup


def test_window_without_duration_runs_to_the_end() -> None:
    plan = schedule(trace(), Scaling(start_s=7.5))
    assert [p.index for p in plan] == [8, 9]
    assert plan[0].at_s == pytest.approx(0.5)  # the gap before the first arrival is kept


def test_token_scaling_in_the_plan_and_its_description() -> None:
    s = Scaling(
        context_scale=0.01, output_scale=0.5, max_prompt_tokens=5, max_output_tokens=20,
        batch_fraction=0,
    )  # fmt: skip
    t = trace()
    plan = schedule(t, s)
    assert [p.prompt_tokens for p in plan] == [1, 2, 3, 4, 5, 5, 5, 5, 5, 5]
    assert [p.output_tokens for p in plan] == [5, 10, 15, 20, 20, 20, 20, 20, 20, 20]
    d = describe(t, s, plan)
    assert d["prompt_tokens"]["clamped"] == 5  # 6..10 would be > 5
    assert d["prompt_tokens"]["trace_total"] == 5500
    assert d["prompt_tokens"]["sent_total"] == 40
    assert d["output_tokens"]["clamped"] == 6
    assert d["output_tokens"]["sent_mean"] == pytest.approx(17.0)
    assert d["selected_requests"] == 10 and d["schedule_span_s"] == 9.0
    assert d["offered_rps"] == pytest.approx(10 / 9)
    assert d["class_counts"] == {INTERACTIVE: 10, BATCH: 0}


def test_batch_assignment_is_deterministic_seeded_and_near_the_fraction() -> None:
    first = [is_batch(i, 0.2, 0) for i in range(5000)]
    assert first == [is_batch(i, 0.2, 0) for i in range(5000)]
    assert 0.18 < sum(first) / 5000 < 0.22
    assert first != [is_batch(i, 0.2, 1) for i in range(5000)]
    assert not any(is_batch(i, 0.0, 0) for i in range(1000))
    assert all(is_batch(i, 1.0, 0) for i in range(1000))


def test_class_follows_the_trace_index_across_windows() -> None:
    t = trace(200)
    whole = {p.index: p.request_class for p in schedule(t, Scaling(batch_fraction=0.5))}
    part = schedule(t, Scaling(start_s=50, duration_s=20, batch_fraction=0.5))
    assert part and all(whole[p.index] == p.request_class for p in part)


@pytest.mark.parametrize(
    "bad",
    [
        Scaling(speedup=0),
        Scaling(duration_s=0),
        Scaling(start_s=-1),
        Scaling(max_requests=0),
        Scaling(context_scale=0),
        Scaling(max_output_tokens=0),
        Scaling(batch_fraction=1.5),
    ],
)
def test_invalid_scaling_is_refused(bad: Scaling) -> None:
    with pytest.raises(ValueError):
        schedule(trace(), bad)


def planned(index: int = 3, klass: str = INTERACTIVE) -> Planned:
    return Planned(index, 0.0, 50, 7, klass, 500, 7)


def test_prompt_ids_are_exact_in_range_and_differ_per_request() -> None:
    ids = TokenRange(4, 259)
    a = prompt_ids(3, 50, ids)
    assert len(a) == 50 and all(4 <= x <= 259 for x in a)
    assert a == prompt_ids(3, 50, ids)
    assert a[:8] != prompt_ids(4, 50, ids)[:8]  # no shared prefix for a prefix cache to hit
    assert a != prompt_ids(3, 50, ids, seed=1)
    assert set(prompt_ids(0, 100, TokenRange(7, 7))) == {7}


def test_token_range_parse() -> None:
    assert TokenRange.parse("4:259") == TokenRange(4, 259)
    for bad in ("4", "9:4", "a:b", "-1:3"):
        with pytest.raises(ValueError, match="LOW:HIGH"):
            TokenRange.parse(bad)


def test_request_body_follows_the_trace_and_marks_batch() -> None:
    body = request_body(planned(), "m", TokenRange())
    assert body["model"] == "m" and len(body["prompt"]) == 50
    assert body["max_tokens"] == 7 and body["ignore_eos"] is True
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0 and "request_class" not in body
    assert request_headers(planned()) == {}
    batch = planned(klass=BATCH)
    assert request_body(batch, "m", TokenRange())["request_class"] == BATCH
    assert "request_class" not in request_body(batch, "m", TokenRange(), class_via="header")
    assert request_headers(batch, "header") == {CLASS_HEADER: BATCH}
    assert request_headers(batch, "both") == {CLASS_HEADER: BATCH}
    assert request_headers(batch, "body") == {}
