"""Reading a checkpoint at a storage rate, so that "from storage" costs what storage costs.

On the dev cluster a checkpoint sits on a local disk and, after its first read, in the
page cache: packing it runs at memory speed, and loading from storage looks as cheap as
a transfer from a peer, which hides the very tier the operator works to avoid. Real
model storage (S3, NFS, a PVC) serves a few Gbit/s per node while GPU NICs run
100-400 Gbit/s. A `Pacer` holds the bytes a load reads to a rate ($CASCADE_STORAGE_MBIT):
before each chunk it waits until rate x elapsed covers every byte read so far plus that
chunk, so the reads never run ahead of the rate (no burst, not even the first chunk).
The clock and the sleep are injected, so the arithmetic is tested without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Bytes per paced read: small enough that a load is smooth at tens of Mbit/s, large
# enough that the per-chunk bookkeeping is noise next to the copy.
CHUNK_BYTES = 1 << 20


def bytes_per_second(mbit: float) -> float:
    """Megabits per second (network and storage vendors' unit) as bytes per second."""
    return mbit * 1_000_000 / 8


@dataclass(frozen=True)
class StorageRead:
    """How one read of a checkpoint went: what the worker's status reports."""

    bytes_read: int
    seconds: float
    rate_mbit: float | None  # the limit applied; None = unlimited


class Pacer:
    """Counts the bytes a load reads and, with a rate, paces them; starts its clock now."""

    def __init__(
        self,
        rate_mbit: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_mbit is not None and rate_mbit <= 0:
            raise ValueError(f"storage rate must be more than 0 Mbit/s, got {rate_mbit}")
        self.rate_mbit = rate_mbit
        self._clock = clock
        self._sleep = sleep
        self._started = clock()
        self.bytes_read = 0

    def elapsed(self) -> float:
        return self._clock() - self._started

    def wait_for(self, nbytes: int) -> float:
        """Seconds to wait before `nbytes` more may be read (0 when unlimited or due)."""
        if self.rate_mbit is None:
            return 0.0
        due = (self.bytes_read + nbytes) / bytes_per_second(self.rate_mbit)
        return max(0.0, due - self.elapsed())

    def take(self, nbytes: int) -> None:
        """Block until `nbytes` more may be read, then count them as read."""
        delay = self.wait_for(nbytes)
        if delay > 0:
            self._sleep(delay)
        self.bytes_read += nbytes

    def copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        """dst[:] = src, reading `src` (e.g. a memmap of the checkpoint) at the pace.

        The copy is where the bytes come off storage (a memmap reads on first touch),
        so it is what gets paced: chunk by chunk, each chunk only once it is due."""
        if dst.nbytes != src.nbytes:
            raise ValueError(f"copy of {src.nbytes} bytes into {dst.nbytes}")
        if self.rate_mbit is None:
            dst[:] = src
            self.bytes_read += src.nbytes
            return
        for start in range(0, src.nbytes, CHUNK_BYTES):
            end = min(start + CHUNK_BYTES, src.nbytes)
            self.take(end - start)
            dst[start:end] = src[start:end]

    def report(self) -> StorageRead:
        return StorageRead(self.bytes_read, self.elapsed(), self.rate_mbit)
