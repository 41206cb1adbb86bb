"""StageChain: the head's connections to its stages, on one asyncio loop.

`attach` opens a control connection to every stage (last first: a stage must know the
session before its upstream introduces itself with `feed`), checks the answers form a
contiguous chain from the head's last layer to the model's end, and opens the data
connection to stage 1. `submit` ships one micro-batch and returns a future of its
logits; one reader task per control connection resolves those futures (last stage) and
turns a `failed` report or a broken connection into `fail`, which is final: the first
error fails every pending and later micro-batch with a `PipelineError` naming the stage.
While attached it sends every stage a heartbeat each HEARTBEAT_S (frames.py: a stage
ends the session of a head silent for HEAD_SILENCE_S).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cascade_protocol.peer_auth import PIPELINE, PeerKey, PeerProof, prove_or_none
from cascade_worker.access import peer_key
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.pipeline.bounds import check_result
from cascade_worker.pipeline.frames import (
    CODEC,
    HEARTBEAT_S,
    Attach,
    Attached,
    BatchMeta,
    Detach,
    Failed,
    Feed,
    Heartbeat,
    PipelineFrame,
    Result,
    Work,
)
from cascade_worker.pipeline.wire import recv_tensor, send_tensor, spec_of
from cascade_worker.transport.endpoint import Endpoint, TransportError
from cascade_worker.transport.frames import FrameError
from cascade_worker.transport.pool import EndpointPool

log = logging.getLogger(__name__)

Ep = Endpoint[PipelineFrame]


class PipelineError(RuntimeError):
    """The pipeline cannot run: a stage is gone, refused, failed or timed out."""


@dataclass
class StageInfo:
    index: int  # position in the chain (the head is 0)
    address: str
    layers: tuple[int, int] | None = None  # known once attached

    def __str__(self) -> str:
        layers = "?" if self.layers is None else f"{self.layers[0]}:{self.layers[1]}"
        return f"pipeline stage {self.index} (layers {layers} at {self.address})"


class StageChain:
    """Use from one event loop only (the executor's); see the module docstring."""

    def __init__(
        self,
        session: str,
        addresses: Sequence[str],
        *,
        model: str,  # the head's model fingerprint
        cache: CacheConfig,
        device: torch.device,
        connect_timeout_s: float,
        vocab: int | None = None,  # results are [rows, vocab] logits (checked when given)
        key: PeerKey | None = None,  # the deployment's peer token: proves the head to stages
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.session = session
        self.heartbeat_s = heartbeat_s
        self.key = peer_key.or_current(key)
        self.vocab = vocab
        self.stages = [StageInfo(i + 1, address) for i, address in enumerate(addresses)]
        self.model = model
        self.cache = cache
        self.device = device
        self.connect_timeout_s = connect_timeout_s
        self._pool = EndpointPool(CODEC, connect_timeout_s=connect_timeout_s)
        self._data: Ep | None = None
        self._controls: dict[int, Ep] = {}  # by stage index
        self._send_lock = asyncio.Lock()
        self._control_lock = asyncio.Lock()  # heartbeats and detach take turns
        self._beats: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[torch.Tensor]] = {}
        self._rows: dict[int, int] = {}  # logits rows each pending step's result has
        self._readers: list[asyncio.Task[None]] = []
        self._steps = itertools.count()
        self.error: PipelineError | None = None
        self._closing = False

    async def attach(self, first_layer: int, num_layers: int) -> None:
        """Attach every stage; PipelineError naming the first one that does not fit."""
        for info in reversed(self.stages):
            await self._attach(info)
        end = first_layer
        for info in self.stages:
            assert info.layers is not None
            if info.layers[0] != end:
                raise PipelineError(f"{info} does not continue at layer {end}")
            end = info.layers[1]
        if end != num_layers:
            raise PipelineError(f"the stages end at layer {end} of {num_layers}")
        self._data = await self._get(self.stages[0], "data")
        await self._data.send_frame(Feed(session=self.session, stage=0, proof=self._proof()))
        self._beats = asyncio.create_task(self._heartbeat())
        log.info("pipeline %s attached: %s", self.session, ", ".join(map(str, self.stages)))

    def _proof(self) -> PeerProof | None:
        return prove_or_none(self.key, PIPELINE, self.session)

    async def _attach(self, info: StageInfo) -> None:
        after = info.index  # self.stages[after] is the stage after `info`
        attach = Attach(
            session=self.session,
            stage=info.index,
            model=self.model,
            block_size=self.cache.block_size,
            num_blocks=self.cache.num_blocks,
            downstream=self.stages[after].address if after < len(self.stages) else None,
            proof=self._proof(),
        )
        ep = await self._get(info, "control")
        try:
            await ep.send_frame(attach)
            reply = await ep.recv_frame(timeout=self.connect_timeout_s * 2)
        except (TransportError, FrameError) as exc:
            raise PipelineError(f"{info} did not attach: {exc}") from exc
        if isinstance(reply, Failed):
            raise PipelineError(f"{info} refused to attach: {reply.error}")
        if not isinstance(reply, Attached) or reply.session != self.session:
            raise PipelineError(f"{info} answered attach with {reply.kind}")
        info.layers = reply.layers
        self._controls[info.index] = ep
        self._readers.append(asyncio.create_task(self._read_control(info, ep)))

    async def _get(self, info: StageInfo, channel: str) -> Ep:
        try:
            return await self._pool.get(info.address, f"{channel}-{self.session}")
        except TransportError as exc:
            raise PipelineError(f"{info} is unreachable: {exc}") from exc

    async def _heartbeat(self) -> None:
        """Tell every stage, each `heartbeat_s`, that this head lives; a stage that cannot
        take a heartbeat within that time is gone (the pipeline breaks)."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            async with self._control_lock:
                if self._closing or self.error is not None:
                    return
                for index, ep in self._controls.items():
                    info = self.stages[index - 1]
                    try:
                        await ep.send_frame(Heartbeat(), timeout=self.heartbeat_s)
                    except TransportError as exc:
                        self.fail(PipelineError(f"{info} takes no heartbeat: {exc}"))
                        return

    async def detach(self, timeout: float = 2.0) -> None:
        """End the session on every stage (they drop its KV cache) and close: each
        stage acknowledges `detach` (its reader task then ends) before we close."""
        self._closing = True
        self.fail(PipelineError("the pipeline was closed"), abort=False)
        async with self._control_lock:  # a heartbeat being sent finishes first
            for ep in self._controls.values():
                if not ep.closed:
                    with contextlib.suppress(TransportError, FrameError, TimeoutError):
                        await ep.send_frame(Detach(), timeout=timeout)
        if self._beats is not None:
            self._beats.cancel()  # asleep, or waiting for the lock: it sends no more
        if self._readers:
            await asyncio.wait(self._readers, timeout=timeout)
        for task in self._readers:
            task.cancel()
        await self._pool.close()

    async def submit(self, piece: StageBatch, hidden: torch.Tensor) -> torch.Tensor:
        """Ship one micro-batch (hidden states after the head's layers); its logits."""
        if self.error is not None:
            raise self.error
        assert self._data is not None
        step = next(self._steps)
        result: asyncio.Future[torch.Tensor] = asyncio.get_running_loop().create_future()
        self._pending[step] = result
        self._rows[step] = sum(piece.num_new) if piece.all_logits else len(piece.seq_ids)
        meta = BatchMeta.model_validate(piece.meta())
        try:
            async with self._send_lock:  # tasks start in submission order: FIFO
                await self._data.send_frame(Work(step=step, batch=meta, tensor=spec_of(hidden)))
                await send_tensor(self._data, hidden)
        except TransportError as exc:
            self.fail(PipelineError(f"cannot send to {self.stages[0]}: {exc}"))
        return await result

    async def _read_control(self, info: StageInfo, ep: Ep) -> None:
        """Results (last stage) and failure reports; a broken connection is a dead stage."""
        try:
            while True:
                frame = await ep.recv_frame()
                if isinstance(frame, Failed):
                    known = 1 <= frame.stage <= len(self.stages)
                    where = self.stages[frame.stage - 1] if known else info
                    self.fail(PipelineError(f"{where} failed: {frame.error}"))
                elif isinstance(frame, Detach) and self._closing:
                    return  # the stage acknowledged the end of the session
                elif isinstance(frame, Result) and info is self.stages[-1]:
                    check_result(frame.tensor, self._rows.pop(frame.step, None), self.vocab)
                    timeout = ep.payload_timeout_s
                    logits = await recv_tensor(ep, frame.tensor, self.device, timeout)
                    waiting = self._pending.pop(frame.step, None)
                    if waiting is not None and not waiting.done():
                        waiting.set_result(logits)
                else:
                    raise FrameError(f"unexpected {frame.kind} from {info}")
        except (TransportError, FrameError) as exc:
            if not self._closing:
                self.fail(PipelineError(f"{info} is gone (connection lost: {exc})"))

    def fail(self, error: PipelineError, *, abort: bool = True) -> None:
        """Break the pipeline (first error wins); fail every pending micro-batch."""
        if self.error is None:
            self.error = error
            if not self._closing:
                log.error("pipeline %s broken: %s", self.session, error)
            if abort:
                self._pool.abort_all()
        pending, self._pending = self._pending, {}
        self._rows.clear()
        for waiting in pending.values():
            if not waiting.done():
                waiting.set_exception(self.error)
