"""The continuous-batching scheduler, tick by tick (pure: no torch, no model)."""

from __future__ import annotations

import pytest

from cascade_protocol.generate import RequestClass
from cascade_worker.engine.kv_blocks import BlockAllocator, CacheConfig, blocks_for
from cascade_worker.engine.scheduler import Scheduler, SchedulerOutput

INTER, BATCH = RequestClass.INTERACTIVE, RequestClass.BATCH


def sched(
    blocks: int = 100, *, block_size: int = 4, max_batch: int = 4, budget: int = 64
) -> Scheduler:
    return Scheduler(CacheConfig(block_size, blocks), max_batch=max_batch, prefill_budget=budget)


def plan(out: SchedulerOutput) -> list[tuple[int, int, int]]:
    """(seq, start, num_new) of each scheduled sequence."""
    return [(s.seq_id, s.start, s.num_new) for s in out.scheduled]


def sample_all(s: Scheduler, out: SchedulerOutput) -> None:
    """What the engine does after a step: one token for each sequence that sampled."""
    for seq in out.scheduled:
        if seq.sample:
            s.append_token(seq.seq_id)


def test_prefill_then_decode() -> None:
    s = sched()
    s.add(0, 10, INTER)
    out = s.schedule()
    assert plan(out) == [(0, 0, 10)] and out.scheduled[0].sample
    assert out.scheduled[0].block_table == (0, 1, 2)
    assert out.num_prefill_tokens == 10
    sample_all(s, out)
    out = s.schedule()
    assert plan(out) == [(0, 10, 1)] and out.num_prefill_tokens == 0
    assert out.scheduled[0].block_table == (0, 1, 2)  # position 10 still fits block 2
    sample_all(s, out)
    sample_all(s, out := s.schedule())
    assert plan(out) == [(0, 11, 1)]
    out = s.schedule()
    assert out.scheduled[0].block_table == (0, 1, 2, 3)  # position 12 needs a new block


def test_max_batch_limits_running_and_is_runtime_settable() -> None:
    s = sched(max_batch=2)
    for i in range(4):
        s.add(i, 3, INTER)
    out = s.schedule()
    assert [x.seq_id for x in out.scheduled] == [0, 1]
    assert (s.num_running, s.num_waiting) == (2, 2)
    sample_all(s, out)
    s.max_batch = 3
    out = s.schedule()
    assert plan(out) == [(0, 3, 1), (1, 3, 1), (2, 0, 3)]
    sample_all(s, out)
    s.max_batch = 1  # lowering never cuts running sequences; admissions stop
    out = s.schedule()
    assert [x.seq_id for x in out.scheduled] == [0, 1, 2]
    sample_all(s, out)
    s.finish(0)
    s.finish(1)
    assert [x.seq_id for x in s.schedule().scheduled] == [2]
    with pytest.raises(ValueError, match="max_batch"):
        s.max_batch = 0


def test_prefill_budget_chunks_prompts_decodes_are_free() -> None:
    s = sched(budget=8)
    s.add(0, 3, INTER)
    sample_all(s, s.schedule())
    s.add(1, 20, INTER)
    s.add(2, 5, INTER)
    out = s.schedule()
    # the decode costs no budget; seq 1 gets the whole budget, seq 2 waits
    assert plan(out) == [(0, 3, 1), (1, 0, 8)]
    assert [x.sample for x in out.scheduled] == [True, False]
    sample_all(s, out)
    out = s.schedule()
    assert plan(out) == [(0, 4, 1), (1, 8, 8)]
    sample_all(s, out)
    out = s.schedule()
    assert plan(out) == [(0, 5, 1), (1, 16, 4), (2, 0, 4)]
    assert [x.sample for x in out.scheduled] == [True, True, False]
    sample_all(s, out)
    assert plan(s.schedule()) == [(0, 6, 1), (1, 20, 1), (2, 4, 1)]


def test_interactive_before_batch() -> None:
    s = sched(max_batch=2)
    s.add(0, 2, BATCH)
    s.add(1, 2, BATCH)
    s.add(2, 2, INTER)
    out = s.schedule()
    assert [x.seq_id for x in out.scheduled] == [2, 0]  # the interactive one jumps the queue
    sample_all(s, out)
    s.add(3, 2, INTER)
    out = s.schedule()
    # the running set is full: the batch-class sequence makes room for the interactive one
    assert out.preempted == [0]
    assert [x.seq_id for x in out.scheduled] == [2, 3]
    sample_all(s, out)
    s.finish(2)
    out = s.schedule()
    assert plan(out) == [(3, 2, 1), (0, 0, 3)]  # seq 0 recomputes prompt + its token


def test_admission_waits_for_kv_capacity_head_of_line() -> None:
    s = sched(blocks=4, block_size=4)
    s.add(0, 12, INTER)  # 3 blocks
    s.add(1, 8, INTER)  # 2 blocks: does not fit beside seq 0
    s.add(2, 2, INTER)  # would fit, but must not overtake seq 1
    out = s.schedule()
    assert plan(out) == [(0, 0, 12)]
    assert s.kv_usage == pytest.approx(0.75)
    s.finish(0)
    assert s.kv_usage == 0.0
    assert [x.seq_id for x in s.schedule().scheduled] == [1, 2]


def test_preemption_by_recompute_when_cache_is_full() -> None:
    s = sched(blocks=4, block_size=4)
    s.add(0, 4, INTER)
    s.add(1, 4, BATCH)
    s.add(2, 7, INTER)
    out = s.schedule()
    assert plan(out) == [(0, 0, 4), (2, 0, 7), (1, 0, 4)]
    sample_all(s, out)
    assert s.blocks.num_free == 0
    out = s.schedule()
    # seq 0 needs a fifth block: the worst running (batch class) goes back to waiting
    assert out.preempted == [1]
    assert plan(out) == [(0, 4, 1), (2, 7, 1)]
    assert s.num_waiting == 1 and s.seq(1).num_computed == 0 and s.seq(1).num_tokens == 5
    sample_all(s, out)
    s.finish(0)
    out = s.schedule()  # seq 2 takes a third block; seq 1 (two blocks) still waits
    assert plan(out) == [(2, 8, 1)] and s.num_waiting == 1
    sample_all(s, out)
    s.finish(2)
    out = s.schedule()
    assert plan(out) == [(1, 0, 5)]  # readmitted: prompt + its generated token


def test_a_sequence_can_preempt_itself() -> None:
    s = sched(blocks=3, block_size=2)
    s.add(0, 2, INTER)
    s.add(1, 4, INTER)
    out = s.schedule()
    sample_all(s, out)
    out = s.schedule()  # seq 0 grows first (it is older), seq 1 gives way ...
    assert out.preempted == [1] and plan(out) == [(0, 2, 1)]
    sample_all(s, out)
    s.recompute(0)  # an explicit recompute moves seq 0 back to waiting too
    assert s.num_running == 0 and s.blocks.num_free == 3
    out = s.schedule()
    assert plan(out) == [(0, 0, 4)]  # readmitted first (arrival order); seq 1 doesn't fit
    sample_all(s, out)
    s.add(2, 1, INTER)
    s.seq(0).num_tokens = 7  # pretend: needs a 4th block that does not exist
    out = s.schedule()
    assert out.preempted == [0] and out.is_empty


def test_block_allocator() -> None:
    a = BlockAllocator(CacheConfig(block_size=4, num_blocks=3))
    assert blocks_for(9, 4) == 3 and a.extra_blocks(7, 9) == 3
    assert a.grow(7, 5) and a.table(7) == [0, 1]
    assert not a.grow(8, 9) and a.table(8) == []  # all or nothing
    assert a.grow(8, 1) and a.num_free == 0 and a.usage == 1.0
    a.free(7)
    assert a.num_free == 2 and a.grow(9, 8) and a.table(9) == [0, 1]
    a.free(123)  # unknown: no-op
    with pytest.raises(ValueError):
        CacheConfig(0, 1)


def test_finish_and_reset_cache() -> None:
    s = sched(blocks=10)
    s.add(0, 5, INTER)
    s.add(1, 5, INTER)
    s.add(2, 5, INTER)
    sample_all(s, s.schedule())
    s.finish(1)
    s.finish(1)  # idempotent
    s.reset_cache(CacheConfig(block_size=8, num_blocks=2))
    assert s.num_running == 0 and s.num_waiting == 2
    out = s.schedule()
    assert plan(out) == [(0, 0, 6), (2, 0, 6)]
    assert [x.block_table for x in out.scheduled] == [(0,), (1,)]
