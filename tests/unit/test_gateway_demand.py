"""The demand part of the gateway's load report, on a fake clock (pure)."""

from __future__ import annotations

import math

import pytest

from cascade_gateway.demand import DemandTracker, Ticket, prompt_tokens
from cascade_protocol.gateway_load import MAX_REPORTED_BATCH, Demand, QueuedBatch
from cascade_protocol.generate import ChatMessage, GenerateRequest, RequestClass

INTERACTIVE, BATCH = RequestClass.INTERACTIVE, RequestClass.BATCH


def test_nothing_seen_yet() -> None:
    tracker = DemandTracker(started=1000.0)
    assert tracker.report(1000.0, held=0, queued=[]) == Demand(arrival_interval_s=10.0)
    assert tracker.report(1000.0, held=0, queued=[]).last_arrival_age_s is None


def test_arrivals_per_whole_interval_oldest_first() -> None:
    tracker = DemandTracker(started=1003.0, interval=10.0, buckets=3)
    # The bucket the gateway started in (1000-1010) is partial: never reported.
    tracker.arrived(INTERACTIVE, 1004.0)
    assert tracker.arrivals(1009.0) == []
    for t in (1011.0, 1012.0, 1019.9):  # bucket 1010-1020: 3
        tracker.arrived(INTERACTIVE, t)
    tracker.arrived(BATCH, 1015.0)  # batch arrivals are not counted...
    assert tracker.arrivals(1019.99) == []  # the current bucket is left out
    assert tracker.arrivals(1020.0) == [3]
    tracker.arrived(INTERACTIVE, 1041.0)  # 1020-1030 and 1030-1040 saw none
    assert tracker.arrivals(1045.0) == [3, 0, 0]
    # At most `buckets` of them, the newest; the partial current one still left out.
    assert tracker.arrivals(1050.0) == [0, 0, 1]
    assert tracker.arrivals(1100.0) == [0, 0, 0]
    # ...but any arrival is the latest arrival.
    tracker.arrived(BATCH, 1101.0)
    assert tracker.report(1103.5, 0, []).last_arrival_age_s == pytest.approx(2.5)


def test_output_lengths_over_the_last_finished_requests() -> None:
    tracker = DemandTracker(started=0.0, outputs=4)
    for n in (100, 2, 4, 4, 6):  # the first falls out of the window
        tracker.finished(n)
    demand = tracker.report(1.0, 0, [])
    assert (demand.output_samples, demand.output_tokens_mean) == (4, 4.0)
    assert demand.output_tokens_std == pytest.approx(math.sqrt(2.0))  # population std


def test_batch_queue_oldest_first_with_deadlines_and_a_cap() -> None:
    tracker = DemandTracker(started=0.0)
    queued = [
        Ticket(arrived=50.0, deadline=110.0, prompt_tokens=7, max_tokens=64),
        Ticket(arrived=40.0, deadline=100.0, prompt_tokens=3, max_tokens=16),  # a retry
    ]
    demand = tracker.report(105.0, held=2, queued=queued)
    assert demand.held == 2
    assert demand.batch_queue == [
        QueuedBatch(age_s=65.0, deadline_in_s=-5.0, prompt_tokens=3, max_tokens=16),  # missed
        QueuedBatch(age_s=55.0, deadline_in_s=5.0, prompt_tokens=7, max_tokens=64),
    ]
    many = [Ticket(float(i), i + 60.0, 1, 1) for i in range(MAX_REPORTED_BATCH + 5)]
    listed = tracker.report(10_000.0, 0, reversed(many)).batch_queue
    assert len(listed) == MAX_REPORTED_BATCH
    assert listed[0].age_s == 10_000.0  # the oldest kept


def test_prompt_tokens_exact_for_ids_estimated_for_text() -> None:
    assert prompt_tokens(GenerateRequest(request_id="a", prompt_token_ids=[1, 2, 3])) == 3
    assert prompt_tokens(GenerateRequest(request_id="b", prompt="x" * 9)) == 3  # 9 / 4 up
    chat = [ChatMessage(role="system", content="abcd"), ChatMessage(role="user", content="ef")]
    assert prompt_tokens(GenerateRequest(request_id="c", messages=chat)) == 2
