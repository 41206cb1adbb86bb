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
import contextlib
import time
import uuid
from collections.abc import Sequence

import torch

from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.executor import LocalExecutor
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.stage import StageModel
from cascade_worker.pipeline.chain import PipelineError, StageChain, StageInfo
from cascade_worker.pipeline.frames import model_fingerprint
from cascade_worker.pipeline.loop import LoopThread, shared_loop
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
        stages: Sequence[str],
        *,
        micro_batches: int | None = None,
        min_micro_batch_tokens: int = DEFAULT_MIN_MICRO_BATCH_TOKENS,
        step_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not head.is_first:
            raise ValueError(f"the head must run the first layers, not [{head.start}, {head.end})")
        if head.is_last and stages:
            raise ValueError("the head runs the whole model; a pipeline needs no stages")
        if not head.is_last and not stages:
            raise ValueError(f"the head runs [0, {head.end}); stages must run the rest")
        self.head = head
        self.micro_batches = micro_batches or len(stages) + 1
        self.min_micro_batch_tokens = min_micro_batch_tokens
        self.step_timeout_s = step_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.session = uuid.uuid4().hex[:12]
        # The loop all this pipeline's connections live on (see loop.py for which one).
        self._loop = shared_loop() if loop is None else LoopThread(loop=loop)
        self._chain = StageChain(
            self.session,
            stages,
            model=model_fingerprint(head.config),
            cache=head.cache.config,
            device=head.device,
            connect_timeout_s=connect_timeout_s,
        )
        self._closed = False
        self.steps_run = 0  # execute() calls that went through the stages
        self.attached_s = 0.0  # how long attaching the stages took
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
        """Attach every stage (blocking; not from `loop`'s thread); PipelineError naming
        the stage that failed. Without `loop` the process's shared pipeline loop is used."""
        executor = cls(
            head,
            stages,
            micro_batches=micro_batches,
            min_micro_batch_tokens=min_micro_batch_tokens,
            step_timeout_s=step_timeout_s,
            connect_timeout_s=connect_timeout_s,
            loop=loop,
        )
        if not stages:
            return executor
        start = time.perf_counter()
        try:
            attach = executor._chain.attach(head.end, head.config.num_layers)
            executor._loop.run(attach, timeout=connect_timeout_s * 3)
            executor.attached_s = time.perf_counter() - start
        except BaseException as exc:
            executor.close()
            if isinstance(exc, concurrent.futures.TimeoutError | TimeoutError):
                raise PipelineError("attaching the pipeline stages timed out") from exc
            raise
        return executor

    @property
    def stages(self) -> list[StageInfo]:
        return self._chain.stages

    @property
    def error(self) -> PipelineError | None:
        """Why the pipeline broke (or "closed"); None while it works."""
        return self._chain.error

    def close(self) -> None:
        """Detach from every stage (they drop this session's KV cache) and stop. From the
        loop's own thread (a borrowed loop) the detach is scheduled instead of awaited."""
        if self._closed:
            return
        self._closed = True
        if self._loop.is_current():
            self._loop.loop.create_task(self._chain.detach())
            return
        with contextlib.suppress(Exception):
            self._loop.run(self._chain.detach(), timeout=10)

    # -- the Executor protocol --------------------------------------------------------------

    @property
    def cache(self) -> CacheConfig:
        return self.head.cache.config

    def execute(self, batch: StageBatch) -> torch.Tensor:
        if self.error is not None:
            raise self.error
        if not self.stages:
            return self.head.forward(batch)
        sizes = split_sizes(batch.num_new, self.micro_batches, self.min_micro_batch_tokens)
        waits = []
        for piece in split_batch(batch, sizes):
            hidden = self.head.forward(piece)
            waits.append(self._loop.submit(self._chain.submit(piece, hidden)))
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
            self._loop.call_soon(self._chain.fail, error)
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
