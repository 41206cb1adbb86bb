"""StageServer: one pipeline stage, layers [start, end), serving a head over UCX.

The server holds the stage's weights. A head attaches (control connection): it names
its model (checked against ours), the paged-cache geometry its scheduler allocates
from (we build a `StageModel` with a KV cache of exactly that shape) and our downstream
stage (we connect to it and introduce ourselves with `feed`) or none (we are last and
answer on the control connection). One head at a time: a new attach ends the old
session, and so does the head's control connection closing, or the head falling silent
(no heartbeat for HEAD_SILENCE_S: it died with its network); the KV cache goes with it.

Work flows through three tasks so that moving bytes and computing overlap: the data
handler receives micro-batches into an inbox; the compute task runs `forward` in a
worker thread (the event loop keeps receiving and sending meanwhile); the sender task
ships each output downstream (hidden states) or back to the head (logits). A forward
that raises, or a downstream that vanished, is reported to the head as `failed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from cascade_protocol.peer_auth import PIPELINE, PeerKey, prove_or_none
from cascade_worker import accelerator
from cascade_worker.access import peer_key
from cascade_worker.access.refusals import admit
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.stage import StageModel
from cascade_worker.engine.weights import StageWeights
from cascade_worker.pipeline.bounds import check_attach, check_work
from cascade_worker.pipeline.frames import (
    CODEC,
    FROM_LAYER,
    HEAD_SILENCE_S,
    Attach,
    Attached,
    Detach,
    Failed,
    Feed,
    Heartbeat,
    PipelineFrame,
    Result,
    Work,
    model_fingerprint,
)
from cascade_worker.pipeline.session import Ep, Session
from cascade_worker.pipeline.wire import recv_tensor, send_tensor, spec_of
from cascade_worker.transport.endpoint import TransportError
from cascade_worker.transport.frames import FrameError
from cascade_worker.transport.pool import EndpointPool
from cascade_worker.transport.shared import SharedServer, own_or_lent

log = logging.getLogger(__name__)


class StageServer:
    def __init__(
        self,
        config: ModelConfig,
        weights: StageWeights,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        device: torch.device | str = "cpu",
        connect_timeout_s: float = 5.0,
        listener: SharedServer[PipelineFrame] | None = None,
        key: PeerKey | None = None,
        head_silence_s: float = HEAD_SILENCE_S,
    ) -> None:
        self.config = config
        self.head_silence_s = head_silence_s
        self.key = peer_key.or_current(key)  # no token, no session (None: open)
        self.weights = weights
        self.layers = (weights.start, weights.end)
        self.device = torch.device(device)
        self.fingerprint = model_fingerprint(config)
        self.name = f"stage[{weights.start}:{weights.end}]"
        self._server = own_or_lent(listener, self._handle, CODEC, host, port, self.name)
        self._pool = EndpointPool(CODEC, connect_timeout_s=connect_timeout_s)
        # The forward runs on the node's accelerator (the dev cluster: its quota).
        self._threads = ThreadPoolExecutor(1, "stage-forward", accelerator.enter)
        self._session: Session | None = None
        self.steps_done = 0
        # Called when a head's session ends (it detached, or its pipeline broke): a live
        # scale-up's stage has then done its part (serving/live.py).
        self.on_session_end: Callable[[], None] | None = None
        # Called at each micro-batch of a session until it returns True: its head serves
        # (a live scale-up's source then redirects its queue to it, the first time it has
        # one, serving/cooperate.py).
        self.on_work: Callable[[], bool] | None = None

    @property
    def address(self) -> str:
        return self._server.address

    @property
    def attached(self) -> bool:
        """A head's session is open."""
        return self._session is not None

    async def start(self) -> StageServer:
        await self._server.start()
        return self

    async def close(self) -> None:
        if self._session is not None:
            await self._end(self._session)
        await self._server.close()
        await self._pool.close()
        self._threads.shutdown(wait=False, cancel_futures=True)

    # -- connections ----------------------------------------------------------------------

    async def _handle(self, ep: Ep) -> None:
        first = await ep.recv_frame()
        if isinstance(first, Attach | Feed):
            admit(self.key, first.proof, PIPELINE, first.session, f"{self.name} {first.kind}")
        if isinstance(first, Attach):
            await self._control(ep, first)
        elif isinstance(first, Feed):
            await self._feed(ep, first)
        else:
            raise FrameError(f"a connection must open with attach or feed, not {first.kind}")

    async def _control(self, ep: Ep, attach: Attach) -> None:
        if self._session is not None:
            log.warning(
                "%s: session %s replaced by %s",
                self.name,
                self._session.attach.session,
                attach.session,
            )
            self._session.control.abort()  # the old head learns it lost us
            await self._end(self._session)
        try:
            session = await self._open(ep, attach)
        except Exception as exc:
            log.warning("%s: refusing attach %s: %s", self.name, attach.session, exc)
            await ep.send_frame(Failed(stage=attach.stage, error=str(exc)))
            return
        await ep.send_frame(
            Attached(session=attach.session, stage=attach.stage, layers=self.layers)
        )
        log.info("%s: attached as stage %d of session %s", self.name, attach.stage, attach.session)
        try:
            # Heartbeats until detach; closing = detach; a silent head is gone (frames.py).
            while not isinstance(frame := await ep.recv_frame(self.head_silence_s), Detach):
                if not isinstance(frame, Heartbeat):
                    raise FrameError(f"unexpected {frame.kind} on the control connection")
        except TransportError as exc:
            log.warning("%s: session %s: its head is gone: %s", self.name, attach.session, exc)
            raise
        finally:
            await self._end(session)
        # Acknowledge: the head closes its connections only after this, so no frame of
        # its is cut in half by the close.
        with contextlib.suppress(TransportError):
            async with session.control_lock:
                await ep.send_frame(Detach())

    async def _open(self, ep: Ep, attach: Attach) -> Session:
        if attach.model != self.fingerprint:
            raise ValueError(
                f"model mismatch: the head runs {attach.model}, this stage holds {self.fingerprint}"
            )
        cache = check_attach(attach, self.config)
        model = await asyncio.get_running_loop().run_in_executor(
            self._threads, StageModel, self.config, self.weights, cache, self.device
        )
        downstream = None
        if attach.downstream is not None:
            if self.layers[1] == self.config.num_layers:
                raise ValueError("this stage ends the model but was given a downstream stage")
            downstream = await self._pool.get(attach.downstream, attach.session)
            proof = prove_or_none(self.key, PIPELINE, attach.session)
            await downstream.send_frame(
                Feed(session=attach.session, stage=attach.stage, proof=proof)
            )
        elif self.layers[1] != self.config.num_layers:
            raise ValueError(
                f"told to be the last stage, but the model has {self.config.num_layers} layers"
            )
        session = Session(attach, model, ep, downstream)
        session.tasks = [
            asyncio.create_task(self._compute(session)),
            asyncio.create_task(self._send(session)),
        ]
        self._session = session
        return session

    async def _end(self, session: Session) -> None:
        if session.ended:
            return
        session.ended = True
        if self._session is session:
            self._session = None
        for task in session.tasks:
            task.cancel()
        await asyncio.gather(*session.tasks, return_exceptions=True)
        if session.upstream is not None:
            session.upstream.abort()  # its handler stops; a put into our inbox never waits
        if session.attach.downstream is not None:
            self._pool.evict(session.attach.downstream)
        log.info("%s: session %s ended", self.name, session.attach.session)
        if self.on_session_end is not None:
            self.on_session_end()

    async def _feed(self, ep: Ep, feed: Feed) -> None:
        session = self._session
        if session is None or session.attach.session != feed.session:
            raise FrameError(f"feed for unknown session {feed.session}")
        if session.upstream is not None:
            raise FrameError(f"a second feed for session {feed.session}")
        session.upstream = ep
        try:
            while not session.ended:
                frame = await ep.recv_frame()
                if not isinstance(frame, Work):
                    raise FrameError(f"unexpected {frame.kind} on a data connection")
                check_work(frame, session.model.cache.config, self.config.hidden)
                tensor = await recv_tensor(ep, frame.tensor, self.device, ep.payload_timeout_s)
                await session.inbox.put((frame, tensor))
        except TransportError as exc:
            if not session.ended:
                await self._report(session, None, f"lost its upstream (stage {feed.stage}): {exc}")
            raise

    # -- work -------------------------------------------------------------------------------

    async def _compute(self, session: Session) -> None:
        loop = asyncio.get_running_loop()
        while True:
            work, tensor = await session.inbox.get()
            if self.on_work is not None and self.on_work():
                self.on_work = None
            batch = StageBatch.from_meta(work.batch.model_dump(), tensor)
            model = session.model
            start = batch.extra.get(FROM_LAYER, model.start)  # cooperative: the split moves
            try:
                out = await loop.run_in_executor(
                    self._threads, model.forward, batch, (start, model.end)
                )
            except Exception as exc:
                log.exception("%s: forward of step %d failed", self.name, work.step)
                await self._report(session, work.step, f"forward failed: {exc!r}")
                continue
            self.steps_done += 1
            await session.outbox.put((work, out))

    async def _send(self, session: Session) -> None:
        while True:
            work, out = await session.outbox.get()
            if session.downstream is None:
                async with session.control_lock:
                    await session.control.send_frame(Result(step=work.step, tensor=spec_of(out)))
                    await send_tensor(session.control, out)
                continue
            try:
                await session.downstream.send_frame(
                    Work(step=work.step, batch=work.batch, tensor=spec_of(out))
                )
                await send_tensor(session.downstream, out)
            except TransportError as exc:
                where = session.attach.downstream
                await self._report(
                    session, work.step, f"cannot reach stage {session.stage + 1} at {where}: {exc}"
                )
                return

    async def _report(self, session: Session, step: int | None, error: str) -> None:
        """Tell the head (best effort: if it is gone too, its session ends anyway)."""
        failed = Failed(stage=session.stage, step=step, error=error)
        with contextlib.suppress(TransportError):
            async with session.control_lock:
                await session.control.send_frame(failed)

    def describe(self) -> dict[str, Any]:
        s = self._session
        return {
            "address": self.address,
            "layers": list(self.layers),
            "session": None if s is None else s.attach.session,
            "stage": None if s is None else s.stage,
            "steps_done": self.steps_done,
        }
