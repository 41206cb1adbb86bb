"""The receiving side's primitive: ask one peer for some blocks and take what comes.

`Fetcher.fetch(peer, blocks)` sends one `fetch` on the pooled data connection to the
peer and reads, for each block in order, either `unavailable` or a block header and its
chunks, received straight into the store's preallocated buffer. Each landed chunk is
published to BlockProgress (so this node's own downstream can relay it at once), and a
complete block is installed only if its xxh3 checksum and SHA-256 match; they run on a
thread while the next block arrives, so the loop (and the readiness probe on it) never
waits for a digest. A mismatch resets the block so it is fetched again, never installed.
The outcome says, per block, what happened; a broken connection (peer died, stalled
past the stall timeout, or spoke out of turn) evicts the pooled endpoint and is reported
as `failed`, leaving the rest of the blocks pending.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from cascade_protocol.peer_auth import MULTICAST, PeerKey, prove_or_none
from cascade_worker.multicast.frames import Attach, BlockHeader, Fetch, FrameT, Landed, Unavailable
from cascade_worker.multicast.progress import BlockProgress
from cascade_worker.transport.endpoint import Endpoint, TransportError
from cascade_worker.transport.frames import FrameError
from cascade_worker.transport.pool import EndpointPool

log = logging.getLogger(__name__)


@dataclass
class FetchOutcome:
    installed: list[int] = field(default_factory=list)
    corrupt: list[int] = field(default_factory=list)
    unavailable: list[int] = field(default_factory=list)
    failed: bool = False
    error: str = ""


class Fetcher:
    def __init__(
        self,
        me: str,
        progress: BlockProgress,
        pool: EndpointPool[FrameT],
        peers: Mapping[str, str],
        *,
        depth: int,
        stall_timeout_s: float,
        key: PeerKey | None = None,
    ) -> None:
        self.me = me
        self.key = key  # the deployment's token: proves this node to its senders
        self.progress = progress
        self.store = progress.store
        self.pool = pool
        self.peers = peers
        self.depth = depth
        self.stall_timeout_s = stall_timeout_s
        self.bytes_received = 0
        self.refetched: list[int] = []  # blocks that failed their checksum at least once
        self.served_by: dict[str, list[int]] = {}  # peer -> blocks installed from it

    async def fetch(
        self,
        peer: str,
        blocks: list[int],
        *,
        cut_through: bool,
        step: int | None = None,
        timeout_s: float | None = None,
    ) -> FetchOutcome:
        out = FetchOutcome()
        address = self.peers.get(peer)
        if address is None:
            return FetchOutcome(failed=True, error=f"no address for {peer}")
        stall = self.stall_timeout_s if timeout_s is None else min(timeout_s, self.stall_timeout_s)
        # Each block's digests run on a thread while the next block arrives; a block is
        # held (and forwarded as held) once its verdict is in, in arrival order.
        verdicts: list[tuple[int, asyncio.Future[str | None]]] = []
        try:
            ep = await self.connect(address)
            await ep.send_frame(
                Fetch(node=self.me, blocks=blocks, cut_through=cut_through, step=step)
            )
            for index in blocks:
                frame = await ep.recv_frame(timeout=max(stall, 0.001))
                if isinstance(frame, Unavailable) and frame.index == index:
                    log.info("%s: %s cannot serve block %d: %s", self.me, peer, index, frame.reason)
                    out.unavailable.append(index)
                    continue
                self._check_header(frame, index)
                assert isinstance(frame, BlockHeader)
                await self._receive(ep, frame, max(stall, 0.001))
                if step is not None:  # the sender's step ends when the bytes are here
                    await ep.send_frame(Landed(index=index))
                verdicts.append((index, asyncio.ensure_future(self._verdict(index))))
                while verdicts and verdicts[0][1].done():
                    self._settle(peer, *verdicts.pop(0), out)
        except (TransportError, FrameError) as exc:
            log.warning("%s: lost %s (%s): %s", self.me, peer, address, exc)
            self.pool.evict(address)
            out.failed, out.error = True, str(exc)
        finally:  # every block that arrived whole is judged, the connection lost or not
            for index, verdict in verdicts:
                await asyncio.wait([verdict])
                self._settle(peer, index, verdict, out)
        return out

    async def _verdict(self, index: int) -> str | None:
        return await asyncio.to_thread(self.store.check, index)

    def _settle(
        self, peer: str, index: int, verdict: asyncio.Future[str | None], out: FetchOutcome
    ) -> None:
        problem = verdict.result()
        if problem is None:
            self.store.mark_held(index)
            self.progress.installed(index)
            out.installed.append(index)
            self.served_by.setdefault(peer, []).append(index)
            return
        log.warning("%s: block %d from %s failed its digests: %s", self.me, index, peer, problem)
        self.progress.reset(index)
        self.refetched.append(index)
        out.corrupt.append(index)

    async def connect(self, address: str) -> Endpoint[FrameT]:
        """The pooled data connection to `address`, introduced (attach) once."""
        ep = await self.pool.get(address)
        if not ep.state.get("attached"):
            await ep.send_frame(
                Attach(node=self.me, proof=prove_or_none(self.key, MULTICAST, self.me))
            )
            ep.state["attached"] = True
        return ep

    async def attach_all(self, peers: list[str]) -> None:
        """Introduce this node on its prewarmed connections (failures are retried later)."""
        for peer in peers:
            address = self.peers.get(peer)
            if address is not None and self.pool.cached(address):
                try:
                    await self.connect(address)
                except (TransportError, FrameError) as exc:
                    log.info("%s: attach to %s failed: %s", self.me, peer, exc)
                    self.pool.evict(address)

    def _check_header(self, frame: FrameT, index: int) -> None:
        if not isinstance(frame, BlockHeader) or frame.index != index:
            raise FrameError(f"expected block {index}, got {frame!r}")
        expected = self.store.manifest.blocks[index].nbytes
        if frame.nbytes != expected:
            raise FrameError(f"block {index}: {frame.nbytes} bytes announced, {expected} expected")

    async def _receive(self, ep: Endpoint[FrameT], header: BlockHeader, stall: float) -> None:
        index, nbytes, chunk = header.index, header.nbytes, header.chunk_bytes
        self.progress.reset(index)

        def landed(i: int) -> None:
            self.progress.advance(index, min((i + 1) * chunk, nbytes))

        self.bytes_received += await ep.recv_into(
            self.store.buffer(index),
            chunk_bytes=chunk,
            on_chunk=landed,
            depth=self.depth,
            timeout=stall,
        )
