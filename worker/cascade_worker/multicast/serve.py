"""The sending side: answer `fetch` requests with blocks, relaying while they arrive.

Each connection a peer opens is one conversation (the transport runs a task per
connection). Its first frame decides what it is: `hello` opens the control conversation
(only the leader accepts it), `attach` or `fetch` opens a data conversation, anything
else is a protocol error that closes the connection. When a data connection ends, its
receiver is marked gone for the step order.

Serving one block:
- cut-through fetch (chains): wait until the block's first chunk has landed, announce
  it, then send chunk i as soon as its bytes are in (BlockProgress.wait_bytes);
- verified fetch (retries, binomial steps): wait until the block is installed (passed
  its checksum); a fetch that names a binomial step first waits for this node's earlier
  planned sends (order.py: step order, skipping receivers that are gone), then takes the
  node's send slot, so the node sends one block at a time as the schedule assumes;
- the node gave up on the block: `unavailable` (or, mid-block, the connection is
  closed; the receiver then treats this node as gone and re-attaches elsewhere).

Synchronization is local, not a global barrier: a step's send starts as soon as the
sender holds the block, its earlier planned sends are done and the receiver has asked
for it (the receiver asks once its previous step's block has landed).

Fault injection (tests only): blocks listed in `corrupt` are sent once from a copy with
one bit flipped, as a faulty link or relay would.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection

import numpy as np

from cascade_protocol.peer_auth import MULTICAST, PeerKey
from cascade_worker.access.refusals import admit
from cascade_worker.multicast.frames import (
    Attach,
    BlockHeader,
    Fetch,
    FrameT,
    Hello,
    Landed,
    Unavailable,
)
from cascade_worker.multicast.order import StepOrder
from cascade_worker.multicast.progress import BlockProgress, BlockUnavailable, Pacer
from cascade_worker.transport.endpoint import Endpoint
from cascade_worker.transport.frames import FrameError

log = logging.getLogger(__name__)

ControlHandler = Callable[[Endpoint[FrameT], Hello], Awaitable[None]]


class _GaveUpMidBlock(Exception):
    pass


class BlockServer:
    def __init__(
        self,
        me: str,
        *,
        chunk_bytes: int,
        depth: int,
        pacer: Pacer,
        corrupt: dict[int, int] | None = None,
        order: StepOrder | None = None,
        key: PeerKey | None = None,
        members: Collection[str] = (),
    ) -> None:
        self.me = me
        # Who may open a connection: holders of the deployment's token (`key`; None: anyone)
        # that are in the plan (`members`; empty: any name).
        self.key = key
        self.members = frozenset(members)
        self.chunk_bytes = chunk_bytes
        self.depth = depth
        self.pacer = pacer
        self.corrupt = dict(corrupt or {})  # block -> how many more sends to corrupt
        self.control: ControlHandler | None = None  # set on the leader
        self.progress: BlockProgress | None = None
        self.ready = asyncio.Event()  # set once the store exists (after the manifest)
        self.step_slot = asyncio.Lock()
        self.order = order if order is not None else StepOrder([], 0.0)
        self.bytes_sent = 0
        self.sent_to: dict[str, int] = {}  # receiver -> bytes sent to it

    def attach(self, progress: BlockProgress) -> None:
        self.progress = progress
        self.ready.set()

    async def handle(self, ep: Endpoint[FrameT]) -> None:
        """Transport handler: one connection, one conversation."""
        first = await ep.recv_frame()
        if isinstance(first, Hello | Attach | Fetch):
            admit(self.key, first.proof, MULTICAST, first.node, first.kind, self.members)
        if isinstance(first, Hello):
            if self.control is None:
                raise FrameError(f"{self.me} is not the leader; unexpected hello")
            ep.peer = first.node
            await self.control(ep, first)
            return
        if not isinstance(first, Attach | Fetch):
            raise FrameError(f"unexpected {first.kind!r} frame opening a connection")
        ep.peer = first.node
        try:
            await self.ready.wait()
            frame: FrameT = first if isinstance(first, Fetch) else await ep.recv_frame()
            while True:
                if not isinstance(frame, Fetch):
                    raise FrameError(f"unexpected {frame.kind!r} frame on a data connection")
                try:
                    await self._serve(ep, frame)
                except _GaveUpMidBlock:
                    log.info("%s: gave up mid-block for %s; closing", self.me, frame.node)
                    return
                frame = await ep.recv_frame()
        finally:
            # Whatever ended it, this receiver will not ask us again on this connection.
            self.order.receiver_gone(ep.peer)

    async def _serve(self, ep: Endpoint[FrameT], fetch: Fetch) -> None:
        assert self.progress is not None
        store = self.progress.store
        for index in fetch.blocks:
            if not 0 <= index < len(store.manifest.blocks):
                await ep.send_frame(Unavailable(index=index, reason="no such block"))
                continue
            nbytes = store.manifest.blocks[index].nbytes
            try:
                if self.corrupt.get(index, 0) > 0 or not fetch.cut_through:
                    await self.progress.wait_held(index)
                else:
                    await self.progress.wait_bytes(index, min(self.chunk_bytes, nbytes))
            except BlockUnavailable as exc:
                await ep.send_frame(Unavailable(index=index, reason=str(exc)))
                continue
            if fetch.step is not None:
                await self.order.turn(fetch.step, fetch.node)
                async with self.step_slot:
                    try:
                        await self._send_block(ep, index, nbytes, gate=False)
                        await self._landed(ep, index)
                    finally:
                        self.order.finished(fetch.step, fetch.node)
            else:
                await self._send_block(ep, index, nbytes, gate=fetch.cut_through)

    async def _landed(self, ep: Endpoint[FrameT], index: int) -> None:
        """Wait for the receiver's `landed` (frames.Landed says why). A receiver silent
        past the stall timeout is cut off like one that closed: its endpoint aborted, so
        the pending receive fails (a watchdog, not a receive timeout: see
        coordinator._next_report)."""
        pending = asyncio.ensure_future(ep.recv_frame())
        done, _ = await asyncio.wait({pending}, timeout=self.order.skip_after_s)
        if not done:
            log.warning("%s: no landed %d from %s; cutting it off", self.me, index, ep.peer)
            ep.abort()
        frame = await pending
        if not isinstance(frame, Landed) or frame.index != index:
            raise FrameError(f"expected landed {index} from {ep.peer}, got {frame.kind!r}")

    async def _send_block(self, ep: Endpoint[FrameT], index: int, nbytes: int, gate: bool) -> None:
        assert self.progress is not None
        progress = self.progress
        data = progress.store.buffer(index)
        if self.corrupt.get(index, 0) > 0:
            self.corrupt[index] -= 1
            data = np.array(data, copy=True)
            if nbytes:
                data[nbytes // 2] ^= 0x01
            log.warning("%s: fault injection: sending block %d with a flipped bit", self.me, index)
            gate = False
        chunk = self.chunk_bytes

        async def ready(i: int) -> None:
            end = min((i + 1) * chunk, nbytes)
            if gate:
                try:
                    await progress.wait_bytes(index, end)
                except BlockUnavailable as exc:
                    raise _GaveUpMidBlock(str(exc)) from exc
            await self.pacer.take(end - i * chunk)

        await ep.send_frame(BlockHeader(index=index, nbytes=nbytes, chunk_bytes=chunk))
        sent = await ep.send_buffer(data, chunk_bytes=chunk, ready=ready, depth=self.depth)
        self.bytes_sent += sent
        self.sent_to[ep.peer] = self.sent_to.get(ep.peer, 0) + sent
