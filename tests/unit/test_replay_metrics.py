"""SSE parsing, request records, percentiles, ITL and SLO attainment on hand-made records."""

from __future__ import annotations

import pytest

from cascade_bench.replay.metrics import (
    DEFAULT_SLOS,
    Slo,
    distribution,
    itl_gaps,
    mean_itl,
    percentile,
    send_lag,
    slo_checks,
    summarize_classes,
)
from cascade_bench.replay.record import RequestRecord
from cascade_bench.replay.scale import BATCH, INTERACTIVE
from cascade_bench.replay.sse import Event, parse_line


def test_parse_line_chunks_usage_done_and_errors() -> None:
    assert parse_line(b'data: {"choices":[{"index":0,"text":"ab"}]}\n') == Event(text="ab")
    assert parse_line('data: {"choices":[{"text":""}]}') == Event()
    usage = parse_line('data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}')
    assert usage == Event(completion_tokens=3, prompt_tokens=5)
    assert parse_line(b"data: [DONE]\r\n") == Event(done=True)
    for skipped in (b"\n", b": keep-alive\n", b"event: x\n"):
        assert parse_line(skipped) is None
    err = parse_line('data: {"error":{"message":"engine died","code":500}}')
    assert err is not None and err.error == "stream: engine died" and not err.rejected
    busy = parse_line('data: {"error":{"message":"queue full","code":429}}')
    assert busy is not None and busy.rejected
    bad = parse_line("data: {nope")
    assert bad is not None and bad.error is not None and "malformed" in bad.error


def record(
    klass: str = INTERACTIVE,
    sent: float = 1.0,
    tokens: tuple[float, ...] = (1.5, 1.6, 1.8),
    usage: int | None = None,
    end: float | None = 2.0,
    error: str | None = None,
    rejected: bool = False,
) -> RequestRecord:
    r = RequestRecord(0, klass, scheduled_s=sent - 0.01, prompt_tokens=10, max_tokens=3)
    r.sent_s, r.token_times, r.end_s = sent, list(tokens), end
    r.usage_tokens, r.error, r.rejected = usage, error, rejected
    return r


def test_record_folds_events() -> None:
    r = RequestRecord(0, INTERACTIVE, 0.0, 10, 3)
    for t, line in enumerate(
        ['data: {"choices":[{"text":"a"}]}', 'data: {"choices":[{"text":""}]}',
         'data: {"choices":[{"text":"b"}]}', 'data: {"choices":[],"usage":{"completion_tokens":3}}',
         "data: [DONE]"]
    ):  # fmt: skip
        event = parse_line(line)
        assert event is not None
        r.add(event, float(t))
    assert r.token_times == [0.0, 2.0] and r.output_tokens == 3 and r.done
    r.sent_s, r.end_s = 0.0, 5.0
    assert r.ok and r.ttft_s == 0.0 and r.e2e_s == 5.0
    assert record(usage=None).output_tokens == 3  # no usage: one token per chunk


def test_percentile_interpolates_like_numpy() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 90) == pytest.approx(3.7)
    assert percentile([float(i) for i in range(101)], 99) == pytest.approx(99.0)
    assert distribution([1.0, 3.0]) == pytest.approx(
        {"mean": 2.0, "p50": 2.0, "p90": 2.8, "p99": 2.98, "max": 3.0}
    )


def test_itl_and_mean_itl() -> None:
    assert itl_gaps([1.5, 1.6, 1.8]) == pytest.approx([0.1, 0.2])
    assert mean_itl(record()) == pytest.approx(0.15)  # 0.3 s over 2 gaps
    # Five tokens in three chunks: per-token time, not per-chunk.
    assert mean_itl(record(usage=5)) == pytest.approx(0.3 / 4)
    assert mean_itl(record(tokens=(1.5,), usage=1)) is None
    assert mean_itl(record(tokens=(1.5,), usage=4)) is None  # one chunk: spacing unseen


def test_slo_checks() -> None:
    slo = Slo(ttft_s=0.5, itl_s=0.1)
    assert slo_checks(record(), slo) == (True, False)  # TTFT 0.5, mean ITL 0.15
    assert slo_checks(record(sent=0.9), slo) == (False, False)  # TTFT 0.6
    assert slo_checks(record(tokens=(1.2, 1.25)), slo) == (True, True)
    assert slo_checks(record(tokens=(1.2,), usage=1), slo) == (True, True)  # no ITL to miss
    assert slo_checks(record(), Slo(None, None)) == (True, True)
    assert slo_checks(record(rejected=True, error="http 429: busy"), Slo(None, None)) == (
        False,
        False,
    )
    assert slo_checks(record(error="timeout: x"), Slo(None, None)) == (False, False)


def test_summary_per_class_counts_failures_as_slo_misses() -> None:
    records = [
        record(),  # TTFT 0.5, ITL 0.15: meets interactive defaults (2 s, 0.2 s)
        record(sent=0.0, tokens=(2.5, 2.6), end=3.0),  # TTFT 2.5: misses
        record(rejected=True, error="http 429: busy", tokens=(), end=1.1),
        record(klass=BATCH, sent=0.0, tokens=(10.0, 11.0, 12.0), end=12.5, usage=3),  # ITL 1 s ok
        record(klass=BATCH, error="http 500: boom", tokens=(), end=1.2),
    ]
    out = summarize_classes(records, DEFAULT_SLOS, wall_s=10.0)
    i, b, a = out[INTERACTIVE], out[BATCH], out["all"]
    assert (i["requests"], i["completed"], i["rejected_429"], i["errors"]) == (3, 2, 1, 0)
    assert (b["requests"], b["completed"], b["rejected_429"], b["errors"]) == (2, 1, 0, 1)
    assert a["error_kinds"] == {"http 500": 1}
    assert i["slo"] == {
        "ttft_s": 2.0, "itl_s": 0.2, "met": 1, "attainment": 1 / 3, "ttft_met": 1, "itl_met": 2,
    }  # fmt: skip
    assert b["slo"]["met"] == 1 and b["slo"]["attainment"] == 0.5 and b["slo"]["itl_s"] is None
    assert a["slo"]["met"] == 2 and a["slo"]["attainment"] == 0.4
    assert i["ttft_s"]["p50"] == pytest.approx(1.5)  # completed only: 0.5 and 2.5
    assert i["itl_s"]["max"] == pytest.approx(0.2)  # pooled gaps 0.1, 0.2, 0.1
    assert i["itl_s"]["p50"] == pytest.approx(0.1)
    assert i["e2e_s"]["mean"] == pytest.approx(2.0)  # 1.0 and 3.0
    assert a["output_tokens"] == 3 + 2 + 3
    assert a["throughput"]["output_tokens_per_s"] == pytest.approx(0.8)
    assert a["throughput"]["requests_per_s"] == pytest.approx(0.3)
    assert a["throughput"]["slo_goodput_rps"] == pytest.approx(0.2)
    assert summarize_classes([], DEFAULT_SLOS, 0.0)["all"]["slo"]["attainment"] is None


def test_send_lag() -> None:
    lag = send_lag([record(sent=1.0), record(sent=2.0)])
    assert lag["max"] == pytest.approx(0.01)
