"""A stage's session state (pipeline/server.py): what one attached head has opened."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import torch

from cascade_worker.engine.stage import StageModel
from cascade_worker.pipeline.frames import Attach, PipelineFrame, Work
from cascade_worker.transport.endpoint import Endpoint

Ep = Endpoint[PipelineFrame]
QUEUE_DEPTH = 4  # micro-batches buffered between receive, compute and send


@dataclass
class Session:
    """One head's session on a stage: its attach, model, connections and queues."""

    attach: Attach
    model: StageModel
    control: Ep
    downstream: Ep | None
    upstream: Ep | None = None  # set when the upstream introduces itself (feed)
    inbox: asyncio.Queue[tuple[Work, torch.Tensor]] = field(
        default_factory=lambda: asyncio.Queue(QUEUE_DEPTH)
    )
    outbox: asyncio.Queue[tuple[Work, torch.Tensor]] = field(
        default_factory=lambda: asyncio.Queue(QUEUE_DEPTH)
    )
    control_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # frames + bytes
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    ended: bool = False

    @property
    def stage(self) -> int:
        return self.attach.stage
