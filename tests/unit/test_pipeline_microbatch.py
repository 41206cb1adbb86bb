"""Cutting an engine step into micro-batches: balanced pieces, identical logits."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_harness import make_model

from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.executor import LocalExecutor
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.pipeline.microbatch import split_batch, split_sizes


@pytest.mark.parametrize(
    ("tokens", "parts", "sizes"),
    [
        ([1, 1, 1, 1, 1, 1], 3, [2, 2, 2]),  # decodes: even
        ([1, 1, 1, 1], 3, [2, 2]),  # max 2 tokens either way: fewer pieces
        ([1, 1], 4, [1, 1]),  # never more pieces than sequences
        ([12, 1, 1, 1], 3, [1, 3]),  # the prefill alone sets the pace
        ([5, 5, 5, 5], 2, [2, 2]),
        ([3, 1, 1, 1, 4], 2, [3, 2]),  # cap 5: [3, 1, 1] [1, 4]
        ([7], 4, [1]),
        ([], 3, []),
        ([2, 2, 2], 1, [3]),
    ],
)
def test_split_sizes_minimise_the_largest_piece(
    tokens: list[int], parts: int, sizes: list[int]
) -> None:
    assert split_sizes(tokens, parts) == sizes


def test_pieces_below_min_tokens_are_not_planned() -> None:
    assert split_sizes([1] * 8, 3, min_tokens=32) == [8]  # a decode step stays whole
    assert split_sizes([1] * 8, 3, min_tokens=4) == [4, 4]
    assert split_sizes([40, 30, 1, 1], 3, min_tokens=32) == [1, 3]
    assert split_sizes([40, 30, 30, 30], 4, min_tokens=32) == [1, 1, 1, 1]


def test_split_sizes_cover_every_sequence_in_order() -> None:
    for n in range(1, 12):
        for parts in range(1, 6):
            tokens = [(i * 7) % 5 + 1 for i in range(n)]
            sizes = split_sizes(tokens, parts)
            assert sum(sizes) == n and 1 <= len(sizes) <= min(parts, n) and min(sizes) >= 1


def test_split_sizes_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        split_sizes([1, 2], 0)
    with pytest.raises(ValueError):
        split_sizes([1, 0], 2)
    with pytest.raises(ValueError):
        split_sizes([1, 2], 2, min_tokens=0)


def test_pieces_run_separately_give_the_whole_batch_logits(tmp_path: Path) -> None:
    store = BlockStore.from_model_dir(make_model(tmp_path / "m"), 1)
    config = ModelConfig.from_hf(store.manifest.config)
    cache = CacheConfig(4, 32)
    whole = LocalExecutor.load(store, config, cache)
    split = LocalExecutor.load(store, config, cache, cuts=(2,))
    batch = StageBatch(
        seq_ids=[0, 1, 2, 3],
        start_positions=[0, 0, 0, 0],
        num_new=[6, 2, 9, 1],
        block_tables=[[0, 1], [2], [3, 4, 5], [6]],
        input=torch.randint(4, 500, (18,), generator=torch.Generator().manual_seed(0)),
    )
    pieces = split_batch(batch, split_sizes(batch.num_new, 3))
    assert [p.seq_ids for p in pieces] == [[0, 1], [2], [3]]
    assert torch.equal(torch.cat([p.input for p in pieces]), batch.input)
    expected = whole.execute(batch)
    got = torch.cat([split.execute(p) for p in pieces])
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="add up"):
        split_batch(batch, [1, 1])
