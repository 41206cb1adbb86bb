"""Iteration-level (continuous) batching: which sequences run this step, how many tokens.

Pure: integers in, a typed `SchedulerOutput` out, no torch, no clock. Every sequence is
`num_tokens` long (prompt + generated) of which `num_computed` have KV in the cache;
each step gives it `num_tokens - num_computed` new tokens (one for a decode), prefills
chunked by a per-step prefill token budget. Order of business in `schedule()`:

1. Class priority: when the running set is exactly full and the best waiting request
   is interactive, the worst running batch-class sequence is preempted to make room
   (one per step; none while the set is over a lowered `max_batch`).
2. Running sequences, best first (interactive before batch, then arrival): each grows
   its block table for this step; when the cache is full the worst running sequence is
   preempted (possibly itself) -- preemption by recompute: its blocks are freed and it
   rejoins the waiting queue, to be prefilled again over prompt + generated tokens.
3. Admission, best waiting first, while fewer than `max_batch` run, prefill budget is
   left, the cache has blocks for the first chunk and nothing was preempted for space.

`max_batch` may be changed at any time (a local autoscaler turns it); lowering it stops
admissions until the running set drains below it, it never cuts running sequences.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from cascade_protocol.generate import RequestClass
from cascade_worker.engine.kv_blocks import BlockAllocator, CacheConfig

CLASS_RANK = {RequestClass.INTERACTIVE: 0, RequestClass.BATCH: 1}
# Prompt tokens one step prefills unless the deployment says (engine.maxPrefillTokensPerStep).
DEFAULT_PREFILL_BUDGET = 512
DEFAULT_MAX_BATCH = 8  # running sequences, when the caller sets no bound


@dataclass
class SeqState:
    seq_id: int
    request_class: RequestClass
    arrival: int  # admission order among equals; assigned by the scheduler
    num_tokens: int  # prompt + generated so far
    num_computed: int = 0  # tokens whose K/V are in the cache

    @property
    def priority(self) -> tuple[int, int]:
        """Smaller is more important."""
        return CLASS_RANK[self.request_class], self.arrival


@dataclass(frozen=True)
class ScheduledSeq:
    seq_id: int
    start: int  # position of the first token computed this step
    num_new: int  # tokens computed this step
    block_table: tuple[int, ...]  # covers positions 0 .. start + num_new - 1
    sample: bool  # the step reaches the sequence's end: its next token is sampled


@dataclass(frozen=True)
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)
    # Sent back to waiting this step, their cache dropped (recomputed when readmitted).
    preempted: list[int] = field(default_factory=list)
    num_prefill_tokens: int = 0  # tokens of chunks longer than one (budgeted)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled


class Scheduler:
    def __init__(self, cache: CacheConfig, *, max_batch: int, prefill_budget: int) -> None:
        if prefill_budget < 1:
            raise ValueError(f"prefill_budget must be >= 1, got {prefill_budget}")
        self.blocks = BlockAllocator(cache)
        self.prefill_budget = prefill_budget
        self.max_batch = max_batch
        self._seqs: dict[int, SeqState] = {}
        self._waiting: list[SeqState] = []  # sorted by priority
        self._running: list[SeqState] = []  # sorted by priority
        self._arrivals = 0

    @property
    def max_batch(self) -> int:
        return self._max_batch

    @max_batch.setter
    def max_batch(self, value: int) -> None:
        if value < 1:
            raise ValueError(f"max_batch must be >= 1, got {value}")
        self._max_batch = value

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def kv_usage(self) -> float:
        return self.blocks.usage

    def seq(self, seq_id: int) -> SeqState:
        return self._seqs[seq_id]

    def is_running(self, seq_id: int) -> bool:
        return any(s.seq_id == seq_id for s in self._running)

    def add(self, seq_id: int, num_tokens: int, request_class: RequestClass) -> None:
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id} already scheduled")
        seq = SeqState(seq_id, request_class, self._arrivals, num_tokens)
        self._arrivals += 1
        self._seqs[seq_id] = seq
        bisect.insort(self._waiting, seq, key=lambda s: s.priority)

    def append_token(self, seq_id: int) -> None:
        """The engine sampled one more token for `seq_id`."""
        self._seqs[seq_id].num_tokens += 1

    def finish(self, seq_id: int) -> None:
        """Forget `seq_id` (finished or aborted) and free its blocks; no-op if unknown."""
        seq = self._seqs.pop(seq_id, None)
        if seq is None:
            return
        queue = self._running if seq in self._running else self._waiting
        queue.remove(seq)
        self.blocks.free(seq_id)

    def recompute(self, seq_id: int) -> None:
        """Drop `seq_id`'s cache; it is prefilled again over all its tokens when readmitted."""
        seq = self._seqs[seq_id]
        if seq in self._running:
            self._running.remove(seq)
            self._requeue(seq)
        else:
            seq.num_computed = 0
            self.blocks.free(seq_id)

    def reset_cache(self, cache: CacheConfig) -> None:
        """Start over on a new (possibly resized) cache: every sequence is recomputed."""
        for seq in list(self._running):
            self._running.remove(seq)
            self._requeue(seq)
        for seq in self._waiting:
            seq.num_computed = 0
        self.blocks = BlockAllocator(cache)

    def schedule(self) -> SchedulerOutput:
        preempted: list[int] = []
        # 1. Interactive requests take running places from batch-class sequences.
        while (
            self._waiting
            and self._running
            and len(self._running) == self.max_batch
            and self._waiting[0].request_class is RequestClass.INTERACTIVE
            and self._running[-1].request_class is RequestClass.BATCH
        ):
            preempted.append(self._preempt_last())
        scheduled: list[ScheduledSeq] = []
        budget = self.prefill_budget
        out_of_space = False
        # 2. Running sequences, best first; victims come from the tail (not yet scheduled).
        i = 0
        while i < len(self._running):
            seq = self._running[i]
            n = self._chunk(seq, budget)
            if n == 0:
                i += 1  # a prefill waiting for budget keeps its blocks
                continue
            while not self.blocks.grow(seq.seq_id, seq.num_computed + n):
                out_of_space = True
                preempted.append(self._preempt_last())
                if preempted[-1] == seq.seq_id:
                    break
            else:
                scheduled.append(self._take(seq, n))
                budget -= n if n > 1 else 0
                i += 1
        # 3. Admission.
        while (
            self._waiting
            and not out_of_space
            and len(self._running) < self.max_batch
            and budget > 0
        ):
            seq = self._waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self.blocks.grow(seq.seq_id, seq.num_computed + n):
                break  # head of line waits; later ones must not overtake it
            self._waiting.pop(0)
            bisect.insort(self._running, seq, key=lambda s: s.priority)
            scheduled.append(self._take(seq, n))
            budget -= n
        return SchedulerOutput(scheduled, preempted, self.prefill_budget - budget)

    def _chunk(self, seq: SeqState, budget: int) -> int:
        remaining = seq.num_tokens - seq.num_computed
        return remaining if remaining <= 1 else min(remaining, budget)

    def _take(self, seq: SeqState, n: int) -> ScheduledSeq:
        start = seq.num_computed
        seq.num_computed += n
        table = tuple(self.blocks.table(seq.seq_id))
        return ScheduledSeq(seq.seq_id, start, n, table, seq.num_computed == seq.num_tokens)

    def _preempt_last(self) -> int:
        seq = self._running.pop()
        self._requeue(seq)
        return seq.seq_id

    def _requeue(self, seq: SeqState) -> None:
        seq.num_computed = 0
        self.blocks.free(seq.seq_id)
        bisect.insort(self._waiting, seq, key=lambda s: s.priority)
