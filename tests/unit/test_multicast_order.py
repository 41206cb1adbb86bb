"""A sender's planned binomial sends go out in step order; absent receivers are skipped."""

from __future__ import annotations

import asyncio

from cascade_worker.multicast.order import StepOrder

PLAN = [(0, "a", 0), (1, "b", 0), (2, "c", 1)]  # (step, receiver, block)


async def serve(order: StepOrder, step: int, rx: str, log: list[str], delay: float = 0.0) -> None:
    await asyncio.sleep(delay)
    await order.turn(step, rx)
    log.append(rx)
    await asyncio.sleep(0.01)  # sending
    order.finished(step, rx)


def test_requests_arriving_out_of_order_are_served_in_step_order() -> None:
    async def scenario() -> list[str]:
        order = StepOrder(PLAN, skip_after_s=5)
        log: list[str] = []
        await asyncio.gather(
            serve(order, 2, "c", log),
            serve(order, 1, "b", log, 0.01),
            serve(order, 0, "a", log, 0.02),
        )
        return log

    assert asyncio.run(scenario()) == ["a", "b", "c"]


def test_a_gone_receiver_does_not_hold_up_later_steps() -> None:
    async def scenario() -> list[str]:
        order = StepOrder(PLAN, skip_after_s=5)
        log: list[str] = []
        task = asyncio.ensure_future(serve(order, 1, "b", log))
        await asyncio.sleep(0.02)
        assert log == []  # waiting for a's step 0
        order.receiver_gone("a")
        await asyncio.wait_for(task, 1)
        return log

    assert asyncio.run(scenario()) == ["b"]


def test_a_receiver_that_never_asks_is_skipped_after_the_timeout() -> None:
    async def scenario() -> tuple[list[str], list[int]]:
        order = StepOrder(PLAN, skip_after_s=0.05)
        log: list[str] = []
        await asyncio.wait_for(serve(order, 2, "c", log), 2)
        return log, order.skipped

    log, skipped = asyncio.run(scenario())
    assert log == ["c"] and skipped == [0, 1]


def test_unplanned_requests_are_not_ordered() -> None:
    async def scenario() -> list[str]:
        order = StepOrder(PLAN, skip_after_s=5)
        log: list[str] = []
        await asyncio.wait_for(serve(order, 7, "z", log), 1)
        return log

    assert asyncio.run(scenario()) == ["z"]
