"""PipelineExecutor: the engine's `Executor` over stages in other processes.

The head runs layers [0, a) itself and stages 1..n run [a, b), ..., [., L) behind UCX.
`execute(batch)` cuts the step into micro-batches (microbatch.py), and for each one runs
the head's layers on the engine thread, then hands the hidden states to the loop thread,
which ships them to stage 1 while the engine thread computes the next micro-batch; each
stage forwards to the next, the last returns logits to the head, and `execute` returns
them concatenated in the step's order. So with m micro-batches the head and all stages
work on different micro-batches at once (a 2D pipeline within every engine step).

Nothing in a stage needs scheduling state: block tables travel with each micro-batch,
and every stage's KV cache has the geometry of the head's (`cache`), sent on attach.

Failure is final and bounded: a stage that dies (its control connection breaks), refuses
or fails a forward, or a step without a result after `step_timeout_s`, breaks the
pipeline (chain.py): the pending and every later `execute` raise `PipelineError` naming
the stage, and the engine fails those requests with finish_reason "error". Recovery
(another pipeline, or local execution via `switch_to_local`) is the caller's decision.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Sequence

import torch

from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.executor import LocalExecutor
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.stage import StageModel
from cascade_worker.pipeline.attach import AttachedStages, attach_stages
from cascade_worker.pipeline.chain import PipelineError, StageInfo
from cascade_worker.pipeline.microbatch import split_batch, split_sizes

__all__ = ["DEFAULT_MIN_MICRO_BATCH_TOKENS", "PipelineError", "PipelineExecutor"]


# Smallest micro-batch worth its own forward (see microbatch.py); a GPU wants far more.
DEFAULT_MIN_MICRO_BATCH_TOKENS = 32


class PipelineExecutor:
    """Layers [0, a) here, the rest in stage processes; see the module docstring.

    Not thread-safe: the engine's thread calls `execute`, `close`, `switch_to_local`.
    """

    def __init__(
        self,
        head: StageModel,
        attached: AttachedStages | None,
        *,
        micro_batches: int | None = None,
        min_micro_batch_tokens: int = DEFAULT_MIN_MICRO_BATCH_TOKENS,
        step_timeout_s: float = 30.0,
    ) -> None:
        """Over `attached` stages (attach.py); None when the head runs the whole model."""
        if not head.is_first:
            raise ValueError(f"the head must run the first layers, not [{head.start}, {head.end})")
        if head.is_last and attached is not None:
            raise ValueError("the head runs the whole model; a pipeline needs no stages")
        if not head.is_last and attached is None:
            raise ValueError(f"the head runs [0, {head.end}); stages must run the rest")
        if attached is not None:
            if attached.first_layer != head.end:
                raise ValueError(
                    f"the stages continue at layer {attached.first_layer}, the head ends at "
                    f"{head.end}"
                )
            if attached.chain.cache != head.cache.config:
                raise ValueError("the stages were attached with another KV cache geometry")
        self.head = head
        self._attached = attached
        stages = len(attached.chain.stages) if attached is not None else 0
        self.micro_batches = micro_batches or stages + 1
        self.min_micro_batch_tokens = min_micro_batch_tokens
        self.step_timeout_s = step_timeout_s
        self.attached_s = attached.attached_s if attached is not None else 0.0
        self._closed = False
        self.steps_run = 0  # execute() calls that went through the stages
        self.micro_batches_run = 0

    @classmethod
    def connect(
        cls,
        head: StageModel,
        stages: Sequence[str],
        *,
        micro_batches: int | None = None,
        min_micro_batch_tokens: int = DEFAULT_MIN_MICRO_BATCH_TOKENS,
        step_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> PipelineExecutor:
        """Attach every stage (blocking; not from `loop`'s thread) and run over them;
        PipelineError naming the stage that failed (attach.py: the shared loop when
        `loop` is None)."""
        attached = None
        if stages:
            attached = attach_stages(
                head.config, head.cache.config, head.device, stages, head.end,
                connect_timeout_s=connect_timeout_s, loop=loop,
            )  # fmt: skip
        return cls(
            head,
            attached,
            micro_batches=micro_batches,
            min_micro_batch_tokens=min_micro_batch_tokens,
            step_timeout_s=step_timeout_s,
        )

    @property
    def stages(self) -> list[StageInfo]:
        return self._attached.chain.stages if self._attached is not None else []

    @property
    def error(self) -> PipelineError | None:
        """Why the pipeline broke (or "closed"); None while it works."""
        return self._attached.chain.error if self._attached is not None else None

    def close(self) -> None:
        """Detach from every stage (they drop this session's KV cache) and stop. From the
        loop's own thread (a borrowed loop) the detach is scheduled instead of awaited."""
        attached = self._attached
        if self._closed or attached is None:
            self._closed = True
            return
        self._closed = True
        if attached.loop.is_current():
            attached.loop.loop.create_task(attached.chain.detach())
            return
        attached.close()

    # -- the Executor protocol --------------------------------------------------------------

    @property
    def cache(self) -> CacheConfig:
        return self.head.cache.config

    def execute(self, batch: StageBatch) -> torch.Tensor:
        if self.error is not None:
            raise self.error
        attached = self._attached
        if attached is None:
            return self.head.forward(batch)
        sizes = split_sizes(batch.num_new, self.micro_batches, self.min_micro_batch_tokens)
        waits = []
        for piece in split_batch(batch, sizes):
            hidden = self.head.forward(piece)
            waits.append(attached.loop.submit(attached.chain.submit(piece, hidden)))
        deadline = time.monotonic() + self.step_timeout_s
        outs = [self._result(w, deadline) for w in waits]
        self.steps_run += 1
        self.micro_batches_run += len(outs)
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    def _result(
        self, wait: concurrent.futures.Future[torch.Tensor], deadline: float
    ) -> torch.Tensor:
        try:
            return wait.result(max(0.0, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError:
            last = self.stages[-1]
            error = PipelineError(f"no result from {last} within {self.step_timeout_s:.0f} s")
            assert self._attached is not None
            self._attached.loop.call_soon(self._attached.chain.fail, error)
            raise error from None

    # -- mode switch ------------------------------------------------------------------------

    def switch_to_local(
        self, engine: LLMEngine, full: StageModel | Sequence[StageModel]
    ) -> LocalExecutor:
        """Run `engine` on layers held here from its next step, and leave the pipeline.

        Call between steps, from the engine's thread. `full` covers [0, L) (one stage or
        a contiguous chain). Every unfinished request keeps its tokens; its KV cache is
        recomputed in the new stages from prompt + generated tokens (the engine's
        preemption-by-recompute path), so greedy generation continues unchanged.
        """
        local = LocalExecutor([full] if isinstance(full, StageModel) else full)
        engine.replace_executor(local)
        self.close()
        return local
