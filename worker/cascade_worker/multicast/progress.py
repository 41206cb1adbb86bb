"""How much of each block has landed, so a node can relay bytes it has not finished.

A chain hop receives block i chunk by chunk and forwards each chunk as soon as it has
landed (cut-through): the forwarder waits on `wait_bytes(i, end_of_its_chunk)`. A
verified request waits on `wait_held(i)` instead (the block passed its checksum). Byte
counts, not chunk numbers, are tracked, so upstream and downstream may cut blocks into
different chunk sizes. A block that fails its checksum is `reset` to zero and arrives
again; a relay that already sent the bad bytes is caught by its receiver's checksum.

When a node gives up (`abandon`), every wait for a block it does not hold raises
`BlockUnavailable`, so the peers pulling from it move on instead of hanging.

All methods run on the node's event loop; waits are woken by a shared "something
changed" event (cheap: a few hundred changes per block at most).
"""

from __future__ import annotations

import asyncio
import time

from cascade_worker.blocks.store import BlockStore


class BlockUnavailable(Exception):
    """This node will not get the block (it gave up)."""


class BlockProgress:
    def __init__(self, store: BlockStore) -> None:
        self.store = store
        self.landed: dict[int, int] = {
            b.index: (b.nbytes if store.has(b.index) else 0) for b in store.manifest.blocks
        }
        self.abandoned = False
        self._changed = asyncio.Event()
        # Wall clock the first received bytes landed (a receiver's; a sender's stays None):
        # the worker reports it as its transfer's first byte (status.firstByteAt).
        self.first_byte_at: float | None = None

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def advance(self, index: int, nbytes: int) -> None:
        """The first `nbytes` of block `index` are in its buffer."""
        if nbytes > self.landed[index]:
            if self.first_byte_at is None:
                self.first_byte_at = time.time()
            self.landed[index] = nbytes
            self._notify()

    def reset(self, index: int) -> None:
        if not self.store.has(index):
            self.landed[index] = 0
            self._notify()

    def installed(self, index: int) -> None:
        self.landed[index] = self.store.manifest.blocks[index].nbytes
        self._notify()

    def abandon(self) -> None:
        self.abandoned = True
        self._notify()

    async def wait_bytes(self, index: int, nbytes: int) -> None:
        while self.landed[index] < nbytes and not self.store.has(index):
            if self.abandoned:
                raise BlockUnavailable(f"block {index}: this node gave up on it")
            await self._changed.wait()

    async def wait_held(self, index: int) -> None:
        while not self.store.has(index):
            if self.abandoned:
                raise BlockUnavailable(f"block {index}: this node gave up on it")
            await self._changed.wait()


class Pacer:
    """Caps one node's sending rate across all its connections (None = unlimited).

    BlitzScale throttles scale-out traffic on a NIC shared with serving; tests use it to
    make a transfer last long enough to kill a node in the middle of it.
    """

    def __init__(self, bytes_per_s: float | None) -> None:
        self.bytes_per_s = bytes_per_s
        self._next = 0.0

    async def take(self, nbytes: int) -> None:
        if not self.bytes_per_s:
            return
        now = time.monotonic()
        start = max(now, self._next)
        self._next = start + nbytes / self.bytes_per_s
        if start > now:
            await asyncio.sleep(start - now)
