"""CooperativeExecutor: a loading target and its source run each batch together.

BlitzScale's live autoscaling (5.2): a target that is still receiving the model heads a
pipeline whose one stage is the source it pairs with (the overloaded instance, which
holds every layer and keeps serving its own requests). Each new batch runs its first T
layers here and the rest on the source, T chosen by `SplitPolicy` (zigzag, or the
best-effort baseline) from the layers held when the batch starts; layers that land
later extend the head (`grow`, between steps), so later batches can run more here.

A request keeps the split its prefill got: its KV cache of each layer lives where that
layer ran. A step therefore runs one micro-batch per split among its sequences, each
with `FROM_LAYER` telling the source where to start, and the results are put back in
the step's order. A split of every layer runs here alone. Failure and the switch to
local execution are PipelineExecutor's.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.stage import StageModel
from cascade_worker.engine.weights import StageWeights
from cascade_worker.pipeline.attach import AttachedStages
from cascade_worker.pipeline.executor import PipelineExecutor
from cascade_worker.pipeline.frames import FROM_LAYER
from cascade_worker.pipeline.microbatch import select, token_rows
from cascade_worker.pipeline.splits import SplitPolicy

SMOOTHING = 0.2  # weight of the newest per-layer compute time in its running average


class CooperativeExecutor(PipelineExecutor):
    """Layers [0, T) of each batch here, [T, L) on the attached source stage."""

    def __init__(
        self,
        head: StageModel,
        attached: AttachedStages,
        splits: SplitPolicy,
        *,
        step_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(head, attached, micro_batches=1, step_timeout_s=step_timeout_s)
        self.splits = splits
        self._split: dict[int, int] = {}  # sequence -> layers run here for it
        self._since, self._held_first = time.monotonic(), head.end
        self._layer_s: float | None = None  # compute seconds per layer of one micro-batch

    def grow(self, more: StageWeights) -> None:
        """Layers that landed (on the engine thread, between steps)."""
        self.head.extend(more)
        gained = self.head.end - self._held_first
        if gained > 0 and self._layer_s is not None:
            self.splits.observe((time.monotonic() - self._since) / gained, self._layer_s)

    def execute(self, batch: StageBatch) -> torch.Tensor:
        if self.error is not None:
            raise self.error
        attached = self._attached
        assert attached is not None
        groups: dict[int, list[int]] = {}
        for i, (seq, start) in enumerate(zip(batch.seq_ids, batch.start_positions, strict=True)):
            if start == 0 or seq not in self._split:  # a prefill from scratch: choose anew
                self._split[seq] = self.splits.next(self.head.end)
            groups.setdefault(self._split[seq], []).append(i)
        deadline = time.monotonic() + self.step_timeout_s
        outs: list[tuple[list[int], torch.Tensor]] = []
        waits = []
        for split, indices in sorted(groups.items()):
            piece = select(batch, indices)
            began = time.perf_counter()
            hidden = self.head.forward(piece, (0, split))
            self._observe((time.perf_counter() - began) / split)
            if split == self.head.config.num_layers:
                outs.append((indices, hidden))  # every layer here: these are logits
                continue
            piece = replace(piece, extra={**piece.extra, FROM_LAYER: split})
            waits.append((indices, attached.loop.submit(attached.chain.submit(piece, hidden))))
        outs += [(indices, self._result(wait, deadline)) for indices, wait in waits]
        self.steps_run += 1
        self.micro_batches_run += len(outs)
        return _in_order(batch, outs)

    def _observe(self, seconds: float) -> None:
        last = self._layer_s
        self._layer_s = seconds if last is None else last + SMOOTHING * (seconds - last)


def _in_order(batch: StageBatch, outs: list[tuple[list[int], torch.Tensor]]) -> torch.Tensor:
    """The groups' logits back in the step's sequence (or token) order."""
    if len(outs) == 1 and outs[0][0] == list(range(batch.num_seqs)):
        return outs[0][1]
    first = outs[0][1]
    if batch.all_logits:
        rows_of = token_rows(batch)
    else:
        rows_of = [range(i, i + 1) for i in range(batch.num_seqs)]
    total = batch.num_tokens if batch.all_logits else batch.num_seqs
    out = first.new_empty((total, first.shape[1]))
    for indices, logits in outs:
        rows = [r for i in indices for r in rows_of[i]]
        out[rows] = logits
    return out
