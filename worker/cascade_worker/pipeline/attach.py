"""Attach a head's stages before (and apart from) the head's own layers.

A pipeline head's connections depend only on the model's shape, the KV cache geometry
it shares with its stages, the device and the stage addresses, not on its weights. So a
live scale-up attaches them while the head's own blocks are still arriving (each stage
then sizes its KV cache too), and builds the `PipelineExecutor` over the attached
stages once they have landed: what is left then is cheap. `PipelineExecutor.connect`
does both at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.pipeline.chain import PipelineError, StageChain
from cascade_worker.pipeline.frames import model_fingerprint
from cascade_worker.pipeline.loop import LoopThread, shared_loop


@dataclass
class AttachedStages:
    """Stages attached for a head that runs [0, first_layer); hand it to one executor."""

    chain: StageChain
    loop: LoopThread  # the loop the chain's connections live on
    first_layer: int
    attached_s: float  # how long attaching took

    def close(self) -> None:
        """Detach (blocking: not from the loop's own thread), if no executor took it."""
        with contextlib.suppress(Exception):
            self.loop.run(self.chain.detach(), timeout=10)


def attach_stages(
    config: ModelConfig,
    cache: CacheConfig,
    device: torch.device,
    stages: Sequence[str],
    first_layer: int,
    *,
    connect_timeout_s: float = 10.0,
    loop: asyncio.AbstractEventLoop | None = None,
) -> AttachedStages:
    """Attach every stage (blocking); PipelineError naming the one that failed. Without
    `loop` the process's shared pipeline loop is used (loop.py says which to use)."""
    thread = shared_loop() if loop is None else LoopThread(loop=loop)
    chain = StageChain(
        uuid.uuid4().hex[:12],
        stages,
        model=model_fingerprint(config),
        cache=cache,
        device=device,
        connect_timeout_s=connect_timeout_s,
        vocab=config.vocab,
    )
    attached = AttachedStages(chain, thread, first_layer, 0.0)
    start = time.perf_counter()
    try:
        thread.run(chain.attach(first_layer, config.num_layers), timeout=connect_timeout_s * 3)
    except BaseException as exc:
        attached.close()
        if isinstance(exc, concurrent.futures.TimeoutError | TimeoutError):
            raise PipelineError("attaching the pipeline stages timed out") from exc
        raise
    attached.attached_s = time.perf_counter() - start
    return attached
