"""A lowered batch cap really limits the running batch of a real (tiny, CPU) LLMEngine:
stepped directly, and behind the AsyncEngine's thread as the local autoscaler sets it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import torch
from engine_harness import drain, greedy, request
from serving_harness import run

from cascade_autoscaler.batch_size import BatchLimits
from cascade_protocol.generate import FinishReason
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.serving.async_engine import AsyncEngine
from cascade_worker.serving.local_autoscaler import ItlSlos, LocalAutoscaler


def engine(model_dir: Path, max_batch: int = 4) -> LLMEngine:
    return LLMEngine.from_model_dir(model_dir, max_batch=max_batch, max_model_len=96, block_size=4)


def test_lowering_the_cap_drains_the_running_set_then_holds_it(model_dir: Path) -> None:
    e = engine(model_dir, max_batch=4)
    for i, n in enumerate((3, 5, 7, 9, 4, 4, 4)):
        e.add_request(request(f"r{i}", [5 + i, 6, 7], greedy(n)))
    lengths: dict[str, int] = {}

    def step() -> int:
        for chunk in e.step():
            lengths[chunk.request_id] = lengths.get(chunk.request_id, 0) + len(chunk.token_ids)
        return e.stats().running

    assert (step(), e.stats().waiting) == (4, 3)
    e.set_max_batch(2)
    running: list[int] = []
    while e.has_work():
        running.append(step())
    # No running sequence is cut: 4 finish on their own (3, 2, 1 left), none admitted
    # meanwhile; once under the cap, never above it again.
    first_under = next(i for i, n in enumerate(running) if n < 2)
    assert running[:first_under] == sorted(running[:first_under], reverse=True)
    assert max(running[first_under:]) <= 2
    assert lengths == {f"r{i}": n for i, n in enumerate((3, 5, 7, 9, 4, 4, 4))}


def test_raising_the_cap_admits_more_at_the_next_step(model_dir: Path) -> None:
    e = engine(model_dir, max_batch=4)
    e.set_max_batch(1)
    for i in range(3):
        e.add_request(request(f"r{i}", [5 + i, 6], greedy(6)))
    e.step()
    assert e.stats().running == 1
    e.set_max_batch(3)
    e.step()
    assert e.stats().running == 3 and e.stats().max_batch == 3
    out = drain(e)
    assert all(chunks[-1].finish_reason is FinishReason.LENGTH for chunks in out.values())


def test_set_max_batch_through_the_engine_thread_bounds_every_step(model_dir: Path) -> None:
    """As the local autoscaler applies a cap: AsyncEngine.set_max_batch, then a burst.
    The autoscaler's window sees every step: its peak running is the batch that ran."""

    async def go() -> None:
        core = engine(model_dir, max_batch=4)
        async_engine = AsyncEngine(core)
        await async_engine.start()
        auto = LocalAutoscaler(BatchLimits(engine_max=4), ItlSlos(0.1, 1.0), now=0.0)
        async_engine.attach(auto)
        assert async_engine.set_max_batch(2)
        auto.window.restart(0.0, 2)
        await asyncio.sleep(0.05)  # idle engine: the thread still applies it at once
        assert async_engine.max_batch == 2 and core.max_batch == 2

        async def one(i: int) -> int:
            stream = await async_engine.submit(request(f"r{i}", [5 + i, 6, 7], greedy(8)))
            return sum([len(c.token_ids) async for c in stream])

        assert await asyncio.gather(*(one(i) for i in range(6))) == [8] * 6
        assert auto.window.steps > 0 and auto.window.peak_running == 2
        assert not auto.window.off_cap
        assert async_engine.load_now().engine_max_batch == 4
        await async_engine.stop()

    run(go, timeout=60)


def test_stats_say_which_steps_prefilled(model_dir: Path) -> None:
    """The local autoscaler times pure decode steps; the engine says which those are."""
    e = engine(model_dir, max_batch=4)
    e.add_request(request("r0", [5, 6, 7, 8], greedy(4)))
    e.step()
    assert e.stats().prefill_tokens == 4
    e.step()
    assert e.stats().prefill_tokens == 0  # decoding only


def test_a_cpu_step_is_timed_on_its_thread_cpu_clock(model_dir: Path) -> None:
    """On one CPU thread a step's time is CPU time: quota pauses do not count."""
    e = engine(model_dir, max_batch=4)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert e.step_clock() == pytest.approx(time.thread_time(), abs=0.05)
        e.add_request(request("r0", [5, 6, 7, 8], greedy(2)))
        e.step()
        assert e.stats().step_s > 0
    finally:
        torch.set_num_threads(threads)
