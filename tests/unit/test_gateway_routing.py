"""Pure routing and queue policy: which backend, which waiter, in which order."""

from __future__ import annotations

import asyncio

import pytest

from cascade_gateway.backends import BackendPool
from cascade_gateway.demand import Ticket
from cascade_gateway.discovery import Discovered
from cascade_gateway.policy import Waiter, assign, over_limit, service_order
from cascade_gateway.router import (
    BackendView,
    capacity,
    context_length,
    next_wakeup,
    pick_backend,
    ready_count,
    routable,
)
from cascade_gateway.scheduler import ClassQueueFull, Scheduler
from cascade_protocol.generate import RequestClass
from cascade_protocol.load import LoadReport
from cascade_protocol.queue_order import QueueOrder

INTERACTIVE, BATCH = RequestClass.INTERACTIVE, RequestClass.BATCH


def report(**kw: object) -> LoadReport:
    base: dict[str, object] = {"instance": "i", "model": "m", "ready": True, "max_batch": 4}
    return LoadReport.model_validate(base | kw)


def view(url: str, in_flight: int = 0, avoid_until: float = 0.0, **kw: object) -> BackendView:
    return BackendView(url, report(**kw), in_flight, avoid_until)


def test_routable_needs_a_ready_non_draining_report_and_no_cool_down() -> None:
    assert routable(view("a"), now=0)
    assert not routable(BackendView("a", None), now=0)
    assert not routable(view("a", ready=False), now=0)
    assert not routable(view("a", draining=True), now=0)
    assert not routable(view("a", avoid_until=5.0), now=4.9)
    assert routable(view("a", avoid_until=5.0), now=5.0)


def test_capacity_is_max_batch_plus_slack_minus_in_flight() -> None:
    assert capacity(view("a", in_flight=1), slack=2) == 5
    assert capacity(view("a", in_flight=9), slack=2) == 0
    assert capacity(view("a", max_batch=0), slack=0) == 1  # a bogus report still takes one
    assert capacity(BackendView("a", None), slack=2) == 0


def test_pick_least_loaded() -> None:
    views = [view("a", in_flight=2), view("b", in_flight=1), view("c", in_flight=3)]
    assert pick_backend(views, 0, slack=0) == "b"
    # Occupancy is relative to batch size: 2/8 beats 1/2.
    views = [view("small", in_flight=1, max_batch=2), view("big", in_flight=2, max_batch=8)]
    assert pick_backend(views, 0, slack=0) == "big"
    # The backend's own report counts (other clients, lag): b is busy by its report.
    views = [view("a", in_flight=1), view("b", running=3, waiting=1)]
    assert pick_backend(views, 0, slack=0) == "a"
    # Equal occupancy: less KV cache in use wins, then the URL (deterministic).
    views = [view("a", kv_cache_usage=0.5), view("b", kv_cache_usage=0.1)]
    assert pick_backend(views, 0, slack=0) == "b"
    assert pick_backend([view("b"), view("a")], 0, slack=0) == "a"


def test_pick_skips_full_unready_and_cooling_backends() -> None:
    views = [
        view("full", in_flight=4),
        view("down", ready=False),
        view("draining", draining=True),
        view("cooling", avoid_until=10),
        view("ok", in_flight=3),
    ]
    assert pick_backend(views, now=0, slack=0) == "ok"
    assert pick_backend(views[:4], now=0, slack=0) is None
    assert pick_backend(views[:4], now=0, slack=1) == "full"


def test_pick_avoids_tried_backends_while_others_exist() -> None:
    views = [view("a"), view("b", in_flight=4)]
    # b is full: a request that failed on a waits for b rather than going back to a...
    assert pick_backend(views, 0, slack=0, tried={"a"}) is None
    # ...unless every routable backend was tried.
    assert pick_backend(views, 0, slack=0, tried={"a", "b"}) == "a"
    assert pick_backend([view("a")], 0, slack=0, tried={"a"}) == "a"


def test_pipelines_are_backends_like_any_other() -> None:
    pipeline = view("pipe", layers=(0, 32), max_batch=16)
    instance = view("inst", in_flight=1)
    assert pick_backend([pipeline, instance], 0, slack=0) == "pipe"


def test_ready_count_context_length_and_wakeup() -> None:
    views = [
        view("a", max_model_len=4096),
        view("b", max_model_len=2048, avoid_until=3.0),
        view("c", ready=False, max_model_len=100),
        BackendView("d", None),
    ]
    assert ready_count(views, now=0) == 1
    assert context_length(views) == 2048
    assert context_length([BackendView("d", None)]) == 0
    assert next_wakeup(views, now=0) == 3.0
    assert next_wakeup(views, now=3.0) is None


def test_service_order_is_interactive_first_then_fifo() -> None:
    queues = {
        BATCH: [Waiter(1, BATCH), Waiter(2, BATCH)],
        INTERACTIVE: [Waiter(3, INTERACTIVE), Waiter(4, INTERACTIVE)],
    }
    assert [w.key for w in service_order(queues, now=0.0)] == [3, 4, 1, 2]


def test_late_waiters_step_behind_on_time_ones_of_their_class_only() -> None:
    queues = {
        INTERACTIVE: [
            Waiter(1, INTERACTIVE, late_at=5.0),
            Waiter(2, INTERACTIVE, frozenset({"a"}), late_at=5.0),  # a retry keeps its place
            Waiter(3, INTERACTIVE, late_at=6.0),
            Waiter(4, INTERACTIVE, late_at=9.0),
        ],
        BATCH: [Waiter(5, BATCH, late_at=1.0), Waiter(6, BATCH, late_at=60.0)],
    }
    assert [w.key for w in service_order(queues, now=4.9)] == [1, 2, 3, 4, 6, 5]
    assert [w.key for w in service_order(queues, now=5.0)] == [2, 3, 4, 1, 6, 5]
    # All late: first come first served again, and still interactive before batch.
    assert [w.key for w in service_order(queues, now=99.0)] == [2, 1, 3, 4, 5, 6]


def test_assign_places_while_capacity_lasts() -> None:
    waiters = [Waiter(k, INTERACTIVE) for k in range(5)]
    views = [view("a", in_flight=2, max_batch=4), view("b", in_flight=0, max_batch=2)]
    placed = assign(waiters, views, now=0, slack=0)
    # b (0/2) first; at 1/2 it ties a's 2/4 and wins on fewer in flight; then a, a.
    assert placed == [(0, "b"), (1, "b"), (2, "a"), (3, "a")]


def test_assign_skips_a_waiter_that_fits_nowhere() -> None:
    waiters = [Waiter(0, INTERACTIVE, frozenset({"a"})), Waiter(1, BATCH)]
    views = [view("a", max_batch=1), view("b", in_flight=1, max_batch=1)]
    assert assign(waiters, views, now=0, slack=0) == [(1, "a")]
    assert assign(waiters, [], now=0, slack=0) == []


def test_queue_limit() -> None:
    assert not over_limit(depth=3, limit=3)
    assert over_limit(depth=4, limit=3)
    assert over_limit(depth=1, limit=0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pool_with(url: str, max_batch: int) -> BackendPool:
    pool = BackendPool([url], clock=Clock())
    pool.update(url, report(max_batch=max_batch))
    return pool


def test_scheduler_queues_prioritises_and_releases() -> None:
    async def go() -> None:
        pool = pool_with("a", max_batch=1)
        sched = Scheduler(pool, {INTERACTIVE: 1, BATCH: 1}, slack=0)
        assert await sched.acquire(INTERACTIVE) == "a"
        assert sched.in_flight(INTERACTIVE) == 1
        batch = asyncio.create_task(sched.acquire(BATCH))
        await asyncio.sleep(0)
        urgent = asyncio.create_task(sched.acquire(INTERACTIVE))
        await asyncio.sleep(0)
        assert (sched.depth(BATCH), sched.depth(INTERACTIVE)) == (1, 1)
        with pytest.raises(ClassQueueFull):
            await sched.acquire(INTERACTIVE)
        sched.release("a", INTERACTIVE)
        assert await urgent == "a"
        assert not batch.done()
        sched.release("a", INTERACTIVE)
        assert await batch == "a"
        assert sched.in_flight(BATCH) == 1
        assert pool.states()[0].in_flight == 1

    asyncio.run(go())


def test_scheduler_cancelled_waiter_leaves_the_queue() -> None:
    async def go() -> None:
        pool = pool_with("a", max_batch=1)
        sched = Scheduler(pool, {INTERACTIVE: 4, BATCH: 4}, slack=0)
        await sched.acquire(INTERACTIVE)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await sched.acquire(INTERACTIVE)
        assert sched.depth(INTERACTIVE) == 0
        sched.release("a", INTERACTIVE)
        assert (sched.in_flight(INTERACTIVE), pool.states()[0].in_flight) == (0, 0)

    asyncio.run(go())


def test_scheduler_retry_jumps_the_queue_and_ignores_the_limit() -> None:
    async def go() -> None:
        pool = pool_with("a", max_batch=1)
        sched = Scheduler(pool, {INTERACTIVE: 1, BATCH: 0}, slack=0)
        await sched.acquire(INTERACTIVE)
        queued = asyncio.create_task(sched.acquire(INTERACTIVE))
        await asyncio.sleep(0)
        retry = asyncio.create_task(sched.acquire(INTERACTIVE, frozenset({"a"}), retry=True))
        await asyncio.sleep(0)
        assert sched.depth(INTERACTIVE) == 2
        sched.release("a", INTERACTIVE)
        assert await retry == "a"
        assert not queued.done()
        queued.cancel()

    asyncio.run(go())


@pytest.mark.parametrize(
    ("order", "late_first"), [(QueueOrder.ON_TIME_FIRST, False), (QueueOrder.FIFO, True)]
)
def test_scheduler_serves_on_time_before_late_unless_fifo(
    order: QueueOrder, late_first: bool
) -> None:
    """On time first (the default): a request still on time goes before a late one,
    and the late one is served next, not dropped. slo.queueOrder FIFO: arrival order."""

    async def go() -> None:
        pool = pool_with("a", max_batch=1)
        clock = pool.clock
        assert isinstance(clock, Clock)
        sched = Scheduler(pool, {INTERACTIVE: 4, BATCH: 4}, slack=0, order=order)
        await sched.acquire(INTERACTIVE)

        def ticket(arrived: float) -> Ticket:
            return Ticket(arrived=arrived, deadline=arrived + 5.0, prompt_tokens=8, max_tokens=8)

        old = asyncio.create_task(sched.acquire(INTERACTIVE, ticket=ticket(clock.now)))
        await asyncio.sleep(0)
        clock.now += 4.0
        fresh = asyncio.create_task(sched.acquire(INTERACTIVE, ticket=ticket(clock.now)))
        await asyncio.sleep(0)
        clock.now += 2.0  # the first waiter is past its TTFT deadline, the second is not
        first, second = (old, fresh) if late_first else (fresh, old)
        sched.release("a", INTERACTIVE)
        assert await first == "a"
        assert not second.done()
        sched.release("a", INTERACTIVE)
        assert await second == "a"  # late or not, never dropped

    asyncio.run(go())


def test_scheduler_wakes_up_when_a_cool_down_ends() -> None:
    async def go() -> None:
        pool = BackendPool(["a"])  # real clock: the wake-up timer uses the loop's
        pool.update("a", report(max_batch=1))
        sched = Scheduler(pool, {INTERACTIVE: 4, BATCH: 4}, slack=0)
        pool.avoid("a", 0.05, "429")
        async with asyncio.timeout(2):
            assert await sched.acquire(INTERACTIVE) == "a"
        sched.close()

    asyncio.run(go())


def test_pool_merges_static_and_discovered_backends() -> None:
    pool = BackendPool(["http://static"])
    changes: list[int] = []
    pool.on_change = lambda: changes.append(1)
    pool.set_discovered([Discovered("http://p1", "p1"), Discovered("http://p2", "p2")])
    assert pool.urls() == ["http://static", "http://p1", "http://p2"]
    pool.set_discovered([Discovered("http://p2", "p2"), Discovered("http://static", "s")])
    assert pool.urls() == ["http://static", "http://p2"]
    pool.update("http://gone", report())  # unknown: ignored
    pool.reserve("http://p2", INTERACTIVE)
    pool.release("http://p2", INTERACTIVE)
    pool.release("http://p2", INTERACTIVE)  # never below zero
    assert [s.in_flight for s in pool.states()] == [0, 0]
    assert len(changes) == 2
