"""Micro-batches: one engine step cut into pieces that occupy different stages at once.

The engine runs one step at a time (schedule, execute, sample). A pipeline of n stages
given the whole step as one batch keeps one stage busy and n - 1 idle; cut into m
micro-batches, stage i works on micro-batch j while stage i + 1 works on j - 1 (the
2D pipeline of λScale §4.3), and a step costs about (m + n - 1) micro-batch times
instead of m·n. Sequences are independent in attention, so a cut between sequences
changes no result. Pieces are contiguous runs of the step's sequences (the logits come
back in the engine's order by concatenation) balanced by new tokens: the largest piece
sets the pipeline's pace, so `split_sizes` minimises it, then uses as few pieces as
reach that minimum.

A piece is worth cutting only when it is compute-bound. Every forward reads all of a
stage's weights whatever its size, so a decode step of a few sequences costs about the
same whole or in pieces: cut into m it costs m weight reads per stage and gains nothing.
Hence `min_tokens`: no piece is planned below it (measured on this machine's CPU for a
768-wide model: a 2-layer forward costs ~5 ms up to ~16 tokens, then grows linearly).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from cascade_worker.engine.batch import StageBatch


def _pack(tokens: Sequence[int], cap: int) -> list[int]:
    """Greedy contiguous groups of at most `cap` tokens; their sizes in sequences."""
    sizes: list[int] = []
    load = cap  # forces a new group for the first sequence
    for t in tokens:
        if load + t > cap:
            sizes.append(0)
            load = 0
        sizes[-1] += 1
        load += t
    return sizes


def split_sizes(tokens: Sequence[int], parts: int, min_tokens: int = 1) -> list[int]:
    """Sequence counts of at most `parts` contiguous groups of `tokens` (new tokens per
    sequence), minimising the largest group's token count; fewer groups when there are
    not `min_tokens` tokens for each."""
    if parts < 1 or min_tokens < 1:
        raise ValueError(f"parts and min_tokens must be >= 1, got {parts}, {min_tokens}")
    if not tokens:
        return []
    if min(tokens) < 1:
        raise ValueError("every sequence has at least one new token")
    parts = max(1, min(parts, sum(tokens) // min_tokens))
    lo, hi = max(tokens), sum(tokens)
    while lo < hi:  # smallest cap that packs into `parts` groups
        mid = (lo + hi) // 2
        if len(_pack(tokens, mid)) <= parts:
            hi = mid
        else:
            lo = mid + 1
    return _pack(tokens, lo)


def split_batch(batch: StageBatch, sizes: Sequence[int]) -> list[StageBatch]:
    """The pieces of `batch` with `sizes` sequences each, in order."""
    if sum(sizes) != batch.num_seqs:
        raise ValueError(f"sizes {list(sizes)} do not add up to {batch.num_seqs} sequences")
    if len(sizes) == 1:
        return [batch]
    pieces = []
    row = 0
    for a, b in itertools.pairwise([0, *itertools.accumulate(sizes)]):
        rows = sum(batch.num_new[a:b])
        pieces.append(
            StageBatch(
                seq_ids=batch.seq_ids[a:b],
                start_positions=batch.start_positions[a:b],
                num_new=batch.num_new[a:b],
                block_tables=batch.block_tables[a:b],
                input=batch.input[row : row + rows],
                all_logits=batch.all_logits,
                extra=dict(batch.extra),
            )
        )
        row += rows
    return pieces


def token_rows(batch: StageBatch) -> list[range]:
    """Each sequence's rows of the batch's flattened tokens, in order."""
    starts = list(itertools.accumulate([0, *batch.num_new]))
    return [range(a, b) for a, b in itertools.pairwise(starts)]


def select(batch: StageBatch, indices: Sequence[int]) -> StageBatch:
    """The sequences `indices` of `batch` (any order) as a batch of their own."""
    rows_of = token_rows(batch)
    rows = [r for i in indices for r in rows_of[i]]
    return StageBatch(
        seq_ids=[batch.seq_ids[i] for i in indices],
        start_positions=[batch.start_positions[i] for i in indices],
        num_new=[batch.num_new[i] for i in indices],
        block_tables=[batch.block_tables[i] for i in indices],
        input=batch.input[rows],
        all_logits=batch.all_logits,
        extra=dict(batch.extra),
    )
