"""Chiron's Algorithm 2 (batch instances from batch backpressure), tick by tick.

Every expected count is worked out by hand in the test: tokens ahead of request k with
output mean μ and deviation sigma are k·μ + z·sigma·√k, a wait is tokens / (instances · Θ +
mixed spare), and a group misses when a member's wait exceeds its time left.
"""

from __future__ import annotations

import math

import pytest

from cascade_autoscaler.batch_queue import (
    BatchQueueConfig,
    BatchQueueContext,
    QueuedBatchRequest,
    decide,
)

THETA = 100.0  # tokens/s of one batch instance
CFG = BatchQueueConfig(max_instances=8)


def reqs(n: int, arrival: float, slo: float, max_tokens: int = 10_000) -> list[QueuedBatchRequest]:
    return [QueuedBatchRequest.with_slo(arrival, slo, 50, max_tokens) for _ in range(n)]


def ctx(
    now: float,
    queue: list[QueuedBatchRequest],
    instances: int,
    *,
    running: int = 0,
    mean: float = 200.0,
    std: float = 0.0,
    spare: float = 0.0,
) -> BatchQueueContext:
    return BatchQueueContext(
        now_s=now,
        queue=tuple(queue),
        instance_tokens_per_s=THETA,
        batch_instances=instances,
        batch_running=running,
        output_mean_tokens=mean,
        output_std_tokens=std,
        mixed_spare_tokens_per_s=spare,
    )


def test_empty_queue_retires_all_only_when_batch_instances_are_idle() -> None:
    # tick 0: queue drained but 2 requests still run on the 3 batch instances: keep them
    rec = decide(ctx(0.0, [], 3, running=2), CFG)
    assert rec.desired_instances == 3
    assert "keep 3 until idle" in rec.reason
    # tick 1: the last requests finished: retire every batch instance
    rec = decide(ctx(5.0, [], 3, running=0), CFG)
    assert (rec.desired_instances, rec.bbp_before, rec.bbp_after) == (0, 0, 0)
    assert "retire all 3" in rec.reason


def test_queue_that_fits_its_deadlines_scales_nothing() -> None:
    # 10 requests, μ = 200: the last has 9·200 = 1800 tokens ahead, 18 s at 100 tok/s < 60 s
    queue = reqs(10, 0.0, 60.0)
    rec = decide(ctx(0.0, queue, 1), CFG)
    assert (rec.desired_instances, rec.bbp_before, rec.bbp_after) == (1, 0, 0)
    assert rec.groups[0].wait_s == pytest.approx(18.0)
    assert rec.groups[0].slack_s == pytest.approx(42.0)
    assert "BBP 0" in rec.reason
    # the same queue with no batch instance fits in 100 tok/s of mixed spare capacity
    assert decide(ctx(0.0, queue, 0, spare=100.0), CFG).desired_instances == 0


def test_more_instances_than_needed_are_kept_while_batch_work_remains() -> None:
    # 1 instance would do, but groups run to completion: no partial scale-down
    rec = decide(ctx(0.0, reqs(10, 0.0, 60.0), 4, running=6), CFG)
    assert rec.desired_instances == 4


def test_growing_queue_gets_exactly_the_fewest_instances() -> None:
    # one bucket throughout (deadlines 60, 70, 80 all in floor(d / 60) = 1), μ = 200, sigma = 0
    queue = reqs(10, 0.0, 60.0)
    rec = decide(ctx(0.0, queue, 1), CFG)
    assert rec.desired_instances == 1  # 1800 / 100 = 18 s <= 60 s

    # tick 10 s: 40 more (deadline 70). Last of 50: 49·200 = 9800 tokens, 60 s left:
    # 1 instance waits 98 s (miss); 2 wait 49 s (meet): fewest is 2
    queue += reqs(40, 10.0, 60.0)
    rec = decide(ctx(10.0, queue, 1), CFG)
    assert (rec.desired_instances, rec.bbp_before, rec.bbp_after) == (2, 1, 0)
    assert "+1" in rec.reason

    # tick 20 s: 100 more (deadline 80). Last of 150: 149·200 = 29800 tokens, 60 s left:
    # 4 instances wait 74.5 s (miss), 5 wait 59.6 s (meet); the 10th request (deadline 60,
    # 1800 tokens, 40 s left) needs only 45 tok/s
    queue += reqs(100, 20.0, 60.0)
    rec = decide(ctx(20.0, queue, 2), CFG)
    assert (rec.desired_instances, rec.bbp_before, rec.bbp_after) == (5, 1, 0)
    assert rec.groups[0].wait_s == pytest.approx(29800 / 500)
    assert "fewest with BBP 0: 5 (+3)" in rec.reason


def test_mixed_spare_capacity_counts_toward_throughput() -> None:
    # the 150 requests above need 29800 / 60 = 496.7 tok/s: 250 spare leaves 246.7: 3 instances
    queue = reqs(10, 0.0, 60.0) + reqs(40, 10.0, 60.0) + reqs(100, 20.0, 60.0)
    assert decide(ctx(20.0, queue, 0, spare=250.0), CFG).desired_instances == 3
    # no instance and no spare: even the head of the queue cannot start
    rec = decide(ctx(0.0, reqs(1, 0.0, 60.0), 0), CFG)
    assert (rec.desired_instances, rec.bbp_before, rec.bbp_after) == (1, 1, 0)
    assert decide(ctx(0.0, reqs(1, 0.0, 60.0), 0, spare=1.0), CFG).desired_instances == 0


def test_float_rounding_neither_adds_nor_drops_an_instance() -> None:
    # 1 token ahead, 1 s left, Θ = 0.3, spare 0.7: one instance gives exactly 1.0 tok/s,
    # a 1.0 s wait, not a miss; the closed form (1.0 - 0.7) / 0.3 = 1.0000000000000002
    # would round up to 2
    queue = reqs(2, 0.0, 1.0)
    c = BatchQueueContext(0.0, tuple(queue), 0.3, 0, 0, 1.0, 0.0, mixed_spare_tokens_per_s=0.7)
    rec = decide(c, CFG)
    assert (rec.desired_instances, rec.bbp_before, rec.bbp_after) == (1, 1, 0)
    assert rec.groups[0].wait_s == 1.0


def test_requests_are_grouped_by_deadline_bucket_fcfs_within() -> None:
    late_slo_a = QueuedBatchRequest(
        arrival_s=0.0, deadline_s=1000.0, prompt_tokens=9, max_tokens=500
    )
    urgent_b = QueuedBatchRequest(arrival_s=5.0, deadline_s=100.0, prompt_tokens=9, max_tokens=500)
    urgent_c = QueuedBatchRequest(arrival_s=10.0, deadline_s=110.0, prompt_tokens=9, max_tokens=500)
    late_slo_d = QueuedBatchRequest(
        arrival_s=1.0, deadline_s=1010.0, prompt_tokens=9, max_tokens=500
    )
    rec = decide(ctx(10.0, [late_slo_a, urgent_b, urgent_c, late_slo_d], 1, mean=100.0), CFG)
    # buckets floor(d / 60): B, C -> 1; A, D -> 16. Dispatch order B, C, A, D
    assert [(g.bucket, g.requests, g.deadline_s) for g in rec.groups] == [
        (1, 2, 100.0),
        (16, 2, 1000.0),
    ]
    # tokens ahead of each group's last request: C has B ahead (100); D has B, C, A (300)
    assert [g.tokens_ahead for g in rec.groups] == [100.0, 300.0]
    assert rec.groups[1].wait_s == pytest.approx(3.0)

    # FCFS within a group: E (deadline 119) arrived before F (deadline 100), so F waits
    # behind E; F misses at 1 instance (200 tokens, 2 s > 1 s left) though E is at the head
    e = QueuedBatchRequest(arrival_s=0.0, deadline_s=119.0, prompt_tokens=0, max_tokens=500)
    f = QueuedBatchRequest(arrival_s=1.0, deadline_s=100.0, prompt_tokens=0, max_tokens=500)
    rec = decide(ctx(99.0, [f, e], 1), CFG)
    assert len(rec.groups) == 1
    assert (rec.desired_instances, rec.bbp_before, rec.bbp_after) == (2, 1, 0)


def test_larger_output_deviation_needs_more_instances() -> None:
    # 101 requests, deadline 110 s away, μ = 100: the last has 100 ahead.
    # sigma = 0: 10000 tokens -> 90.9 tok/s -> 1 instance
    # sigma = 50: 10000 + 1.645·50·10 = 10822 -> 98.4 tok/s -> 1 instance
    # sigma = 100: 10000 + 1.645·100·10 = 11645 -> 105.9 tok/s -> 2 instances
    queue = reqs(101, 0.0, 110.0)
    counts = [
        decide(ctx(0.0, queue, 0, mean=100.0, std=std), CFG).desired_instances
        for std in (0.0, 50.0, 100.0)
    ]
    assert counts == [1, 1, 2]
    est = decide(ctx(0.0, queue, 0, mean=100.0, std=100.0), CFG).groups[0]
    assert est.tokens_ahead == pytest.approx(10000 + 1.6448536 * 100 * math.sqrt(100))
    # the median (z = 0) ignores the deviation
    median = BatchQueueConfig(max_instances=8, quantile=0.5)
    assert decide(ctx(0.0, queue, 0, mean=100.0, std=100.0), median).desired_instances == 1
    # no request can exceed its max_tokens: 100 ahead * 100 = 10000 bounds any sigma
    capped = reqs(101, 0.0, 110.0, max_tokens=100)
    assert decide(ctx(0.0, capped, 0, mean=100.0, std=5000.0), CFG).desired_instances == 1


def test_prompt_tokens_count_with_their_weight() -> None:
    # 11 requests, μ = 100, 50-token prompts weighted 2: 10 ahead * (100 + 100) = 2000
    # tokens over 15 s: 133 tok/s -> 2 instances (1 without prompts: 1000 / 15 = 67)
    weighted = BatchQueueConfig(max_instances=8, prompt_token_weight=2.0)
    queue = reqs(11, 0.0, 15.0)
    assert decide(ctx(0.0, queue, 0, mean=100.0), CFG).desired_instances == 1
    assert decide(ctx(0.0, queue, 0, mean=100.0), weighted).desired_instances == 2


def test_never_more_than_the_maximum() -> None:
    queue = reqs(150, 0.0, 60.0)  # 149·200 = 29800 tokens in 60 s: 5 instances wanted
    rec = decide(ctx(0.0, queue, 1), BatchQueueConfig(max_instances=3))
    assert (rec.desired_instances, rec.bbp_before, rec.bbp_after) == (3, 1, 1)
    assert "capped at max 3" in rec.reason
    # a lowered maximum clamps a larger current count
    rec = decide(ctx(0.0, reqs(2, 0.0, 60.0), 6), BatchQueueConfig(max_instances=3))
    assert (rec.desired_instances, rec.bbp_after) == (3, 0)
    assert "clamped from 6" in rec.reason
    assert (
        decide(ctx(0.0, [], 6, running=1), BatchQueueConfig(max_instances=3)).desired_instances == 3
    )


def test_passed_deadlines_count_as_violated_and_scale_to_max() -> None:
    # tick 100 s: one request 10 s past its deadline, behind nothing, plus 5 that fit
    late = QueuedBatchRequest(arrival_s=0.0, deadline_s=90.0, prompt_tokens=0, max_tokens=500)
    queue = [late, *reqs(5, 95.0, 600.0)]
    rec = decide(ctx(100.0, queue, 1), CFG)
    assert (rec.desired_instances, rec.bbp_before, rec.bbp_after) == (8, 1, 1)
    assert [(g.late, g.violated) for g in rec.groups] == [(True, True), (False, False)]
    assert "1 groups already past their TTFT deadline" in rec.reason
    # a head whose deadline is exactly now starts in time (nothing ahead): not late
    due_now = QueuedBatchRequest(arrival_s=0.0, deadline_s=100.0, prompt_tokens=0, max_tokens=500)
    rec = decide(ctx(100.0, [due_now], 1), CFG)
    assert (rec.desired_instances, rec.bbp_after) == (1, 0)
    assert not rec.groups[0].late


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        BatchQueueConfig(max_instances=1, quantile=1.0)
    with pytest.raises(ValueError):
        BatchQueueConfig(max_instances=1, group_width_s=0.0)
    with pytest.raises(ValueError):
        ctx(0.0, [], 1, std=-1.0)
