"""A non-leader node's side of the control conversation (coordinator.py has the story).

The leader may come up after its followers (processes start in any order), so the
connection is retried until the ready timeout. Data connections are prewarmed before
`ready` with a short retry for peers whose listener is not up yet; a peer that stays
unreachable is simply connected later, on first use.
"""

from __future__ import annotations

import asyncio
import logging
import time

from cascade_protocol.peer_auth import MULTICAST, PeerKey, prove_or_none
from cascade_worker.blocks.manifest import check_fits
from cascade_worker.multicast.frames import Alive, Done, FrameT, Hello, Manifest, Ready, Start
from cascade_worker.multicast.result import NodeResult
from cascade_worker.transport.endpoint import Endpoint, TransportError
from cascade_worker.transport.frames import FrameError
from cascade_worker.transport.pool import EndpointPool

log = logging.getLogger(__name__)


async def prewarm(pool: EndpointPool[FrameT], addresses: list[str], within_s: float) -> None:
    """Open data connections now; retry failures every 0.2 s for up to within_s."""
    give_up = time.monotonic() + within_s
    todo = addresses
    while todo:
        todo = list(await pool.prewarm(todo))
        if not todo or time.monotonic() > give_up:
            return
        await asyncio.sleep(0.2)


class LeaderLink:
    def __init__(
        self,
        pool: EndpointPool[FrameT],
        address: str,
        me: str,
        timeout_s: float,
        heartbeat_s: float = 3.0,
        key: PeerKey | None = None,
    ) -> None:
        self.key = key  # the deployment's token: proves this node to the leader
        self.pool = pool
        self.address = address
        self.me = me
        self.timeout_s = timeout_s
        self.heartbeat_s = heartbeat_s
        self._ep: Endpoint[FrameT] | None = None
        self._beating: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def _connect(self) -> Endpoint[FrameT]:
        give_up = time.monotonic() + self.timeout_s
        while True:
            try:
                return await self.pool.get(self.address, "control")
            except TransportError:
                if time.monotonic() > give_up:
                    raise
                # The leader's listener comes up a few tens of ms after its order (a
                # refused connect fails at once, pool._probe): a short retry, not 0.2 s.
                await asyncio.sleep(0.02)

    async def hello(self, digest: str | None) -> Manifest | None:
        """Introduce this node; without a digest (no store yet) the leader sends the
        manifest (and the materialized state that goes with it)."""
        self._ep = await self._connect()
        want = digest is None
        proof = prove_or_none(self.key, MULTICAST, self.me)
        await self._ep.send_frame(
            Hello(node=self.me, want_manifest=want, digest=digest, proof=proof)
        )
        if not want:
            return None
        frame = await self._ep.recv_frame(timeout=self.timeout_s)
        if not isinstance(frame, Manifest):
            raise FrameError(f"expected the manifest, got {frame.kind!r}")
        try:
            check_fits(frame.manifest)  # before a store allocates its blocks' buffers
        except ValueError as exc:
            raise FrameError(str(exc)) from None
        if not frame.manifest.verify_digest():  # blocks and checksums altered together
            raise FrameError(
                f"the leader's manifest does not match its digest {frame.manifest.digest}: "
                "refused (its blocks, checksums or config were altered)"
            )
        return frame

    async def ready(self) -> float:
        """Say ready and wait for `start`; the seconds since the leader's time zero."""
        assert self._ep is not None
        await self._ep.send_frame(Ready(node=self.me))
        frame = await self._ep.recv_frame(timeout=self.timeout_s * 2)
        if not isinstance(frame, Start):
            raise FrameError(f"expected start, got {frame.kind!r}")
        self._beating = asyncio.ensure_future(self._beat(self._ep))
        return frame.since_s

    async def _beat(self, ep: Endpoint[FrameT]) -> None:
        """`alive` until `done` (coordinator.py says why); whole frames only, so `done`
        waits for a beat in flight instead of cancelling it half sent."""
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), self.heartbeat_s)
                return
            except TimeoutError:
                pass
            try:
                await ep.send_frame(Alive(node=self.me))
            except TransportError:
                return  # the leader is gone: `done` finds out and lingers

    async def _stop_beating(self) -> None:
        self._stop.set()
        if self._beating is not None:
            await self._beating

    async def done(self, result: NodeResult, wait_s: float, linger_s: float) -> None:
        """Report, then keep the node up until `shutdown` (or linger_s if the leader is gone)."""
        assert self._ep is not None
        await self._stop_beating()
        try:
            await self._ep.send_frame(
                Done(node=self.me, missing=result.missing, complete_s=result.complete_s)
            )
            await self._ep.recv_frame(timeout=wait_s)
        except (TransportError, FrameError) as exc:
            log.warning("%s: leader gone (%s); serving %.0fs more", self.me, exc, linger_s)
            await asyncio.sleep(linger_s)
