"""Executors run one scheduled step through all of a model's layers.

The engine hands an executor a `StageBatch` of token ids and gets back logits; how the
layers are laid out is the executor's business. `LocalExecutor` holds every stage in
this process (one stage over all layers, or a chain of stages -- the same code path a
pipeline uses, minus the sockets). A pipeline executor that sends hidden states between
processes implements the same protocol: it owns a `CacheConfig` that every stage's KV
cache was built with, which the engine's scheduler allocates blocks from.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Protocol

import torch

from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.stage import StageModel


class Executor(Protocol):
    @property
    def cache(self) -> CacheConfig:
        """The paged-cache geometry all stages share (the scheduler allocates from it)."""
        ...

    def execute(self, batch: StageBatch) -> torch.Tensor:
        """Token ids in; float32 logits [num_seqs, vocab] (or [T, vocab] with all_logits)."""
        ...


def split_ranges(num_layers: int, cuts: Sequence[int]) -> list[tuple[int, int]]:
    """Layer ranges between cut points: cuts (2,) of 4 layers -> [(0, 2), (2, 4)]."""
    bounds = [0, *cuts, num_layers]
    if any(a >= b for a, b in itertools.pairwise(bounds)):
        raise ValueError(
            f"cut points {list(cuts)} must increase strictly within 1..{num_layers - 1}"
        )
    return list(itertools.pairwise(bounds))


class LocalExecutor:
    """Stages covering layers [0, num_layers) contiguously, run in order in-process."""

    def __init__(self, stages: Sequence[StageModel]) -> None:
        if not stages:
            raise ValueError("need at least one stage")
        num_layers = stages[0].config.num_layers
        expected = 0
        for stage in stages:
            if stage.start != expected:
                raise ValueError(f"stage [{stage.start}, {stage.end}) does not start at {expected}")
            if stage.cache.config != stages[0].cache.config:
                raise ValueError("all stages must share one cache config")
            expected = stage.end
        if expected != num_layers:
            raise ValueError(f"stages end at layer {expected}, the model has {num_layers}")
        self.stages = list(stages)

    @classmethod
    def load(
        cls,
        source: BlockStore | dict[str, torch.Tensor],
        config: ModelConfig,
        cache: CacheConfig,
        *,
        cuts: Sequence[int] = (),
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
    ) -> LocalExecutor:
        ranges = split_ranges(config.num_layers, cuts)
        return cls(
            [
                StageModel.load(source, config, a, b, cache, device=device, dtype=dtype)
                for a, b in ranges
            ]
        )

    @property
    def cache(self) -> CacheConfig:
        return self.stages[0].cache.config

    def execute(self, batch: StageBatch) -> torch.Tensor:
        x = batch.input
        for stage in self.stages:
            x = stage.forward(batch.with_input(x))
        return x
