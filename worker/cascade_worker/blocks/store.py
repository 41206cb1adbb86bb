"""BlockStore: the blocks of one model a worker holds, and the buffers it receives into.

The receiver side preallocates one uint8 buffer per block from the manifest (before the
first byte arrives, so receives land in place), the transport writes into `buffer(i)`,
and `install(i)` verifies the checksum before the block counts as held: a corrupt block
is never installed and can be fetched again into the same buffer. The source side packs
a checkpoint directory (`from_model_dir`) or adopts buffers it already has.

Layer-readiness callbacks let the engine execute while loading. Precisely: whenever
`install(i)` newly marks block i held, let lo..hi be the maximal run of consecutive held
blocks that contains i; every registered callback is called once with
(blocks[lo].layer_start, blocks[hi].layer_end), a half-open layer range. So blocks 2 and
3 held, then 1 arriving, reports the layers of blocks 1..3; the model is complete when a
callback reports (0, num_layers). A callback registered late is called at once for each
existing maximal run, in ascending order. Callbacks run synchronously inside `install`
(keep them cheap, e.g. `loop.call_soon` / set an asyncio.Event); an exception in one is
logged and does not affect the install or the other callbacks.

Not thread-safe: use from one thread (an asyncio loop). Hashing is the only real work in
`install` (xxh3: tens of GB/s, ~2-10 ms for 50 MB).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from cascade_worker.blocks.manifest import ModelManifest, checksum, strong_hash
from cascade_worker.blocks.pacing import StorageRead
from cascade_worker.blocks.pack import pack_model, unpack_block
from cascade_worker.blocks.safetensors_io import write_safetensors

if TYPE_CHECKING:
    from cascade_protocol.materialize import MaterializedState

log = logging.getLogger(__name__)

LayersReady = Callable[[int, int], None]


def shard_name(index: int, count: int) -> str:
    """HF file name of shard `index` (0-based) out of `count`."""
    if count == 1:
        return "model.safetensors"
    return f"model-{index + 1:05d}-of-{count:05d}.safetensors"


def held_run(held: set[int], index: int) -> tuple[int, int]:
    """Inclusive (lo, hi) of the maximal run of consecutive held block indices around index."""
    if index not in held:
        raise ValueError(f"block {index} is not held")
    lo = hi = index
    while lo - 1 in held:
        lo -= 1
    while hi + 1 in held:
        hi += 1
    return lo, hi


def held_runs(held: set[int]) -> list[tuple[int, int]]:
    """All maximal runs of consecutive held block indices, ascending, inclusive bounds."""
    runs: list[tuple[int, int]] = []
    for index in sorted(held):
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs


class BlockStore:
    """Per-block buffers of one model plus which blocks are verified and held."""

    def __init__(self, manifest: ModelManifest, *, prefault: bool = True) -> None:
        """Receiver side: preallocate one buffer per block; nothing held.

        With `prefault` (default) every page is touched now, so first-touch page faults
        (on this VM up to ~3 ms/MiB for never-touched memory, ~0.1 ms/MiB once mapped) are paid
        before the transfer instead of inside it. prefault=False leaves lazy np.empty pages.
        """
        self.manifest = manifest
        self._buffers = [np.empty(b.nbytes, dtype=np.uint8) for b in manifest.blocks]
        if prefault:
            for buf in self._buffers:
                buf.fill(0)
        self._held: set[int] = set()
        self._callbacks: list[LayersReady] = []
        # block index -> time.monotonic() when it was installed (the executor's report).
        self.installed_at: dict[int, float] = {}
        self.storage_read: StorageRead | None = None  # set when packed from a checkpoint
        # Materialized start-up state offered with these weights (read beside them in
        # storage, or received with the manifest); travels wherever the blocks are sent.
        self.materialized: list[MaterializedState] = []

    @classmethod
    def from_model_dir(
        cls, model_dir: Path, blocks: int, *, rate_mbit: float | None = None
    ) -> BlockStore:
        """Source side: pack the HF checkpoint in `model_dir` into `blocks` held blocks,
        reading it at most at `rate_mbit` (storage emulation; None: unlimited)."""
        packed = pack_model(Path(model_dir), blocks, rate_mbit=rate_mbit)
        store = cls.__new__(cls)
        store._adopt(packed.manifest, packed.buffers)
        store.storage_read = packed.read
        now = time.monotonic()
        for index in range(len(packed.buffers)):
            store._held.add(index)  # checksums were computed from these very bytes
            store.installed_at[index] = now
        return store

    @classmethod
    def from_buffers(cls, manifest: ModelManifest, buffers: list[np.ndarray]) -> BlockStore:
        """Adopt existing buffers (no copy) and install them all; ValueError if any is bad."""
        store = cls.__new__(cls)
        store._adopt(manifest, buffers)
        bad = [i for i in range(len(buffers)) if not store.install(i)]
        if bad:
            raise ValueError(f"blocks {bad} do not match their manifest checksums")
        return store

    def _adopt(self, manifest: ModelManifest, buffers: list[np.ndarray]) -> None:
        if len(buffers) != len(manifest.blocks):
            raise ValueError(f"{len(buffers)} buffers for {len(manifest.blocks)} blocks")
        for block, buf in zip(manifest.blocks, buffers, strict=True):
            if buf.dtype != np.uint8 or buf.ndim != 1 or buf.nbytes != block.nbytes:
                raise ValueError(
                    f"block {block.index}: need a 1-D uint8 buffer of {block.nbytes} bytes, "
                    f"got {buf.dtype} {buf.shape}"
                )
            if not buf.flags.c_contiguous:
                raise ValueError(f"block {block.index}: buffer is not contiguous")
        self.manifest = manifest
        self._buffers = list(buffers)
        self._held = set()
        self._callbacks = []
        self.installed_at = {}
        self.storage_read = None
        self.materialized = []

    @property
    def model_digest(self) -> str:
        return self.manifest.digest

    @property
    def num_blocks(self) -> int:
        return len(self._buffers)

    def buffer(self, index: int) -> np.ndarray:
        """The whole uint8 buffer of block `index`: receive target (receiver) or send source."""
        self._check_index(index)
        return self._buffers[index]

    def verify(self, index: int) -> bool:
        """Does buffer(index) match its manifest checksum right now?"""
        self._check_index(index)
        return checksum(self._buffers[index]) == self.manifest.blocks[index].checksum

    def install(self, index: int) -> bool:
        """Verify buffer(index); if it matches, mark it held and fire layer callbacks.

        Returns False (block stays not held, a warning is logged) on a checksum mismatch.
        Installing a block that is already held returns True and fires nothing.
        """
        self._check_index(index)
        if index in self._held:
            return True
        problem = self.check(index)
        if problem is not None:
            log.warning("block %d rejected: %s", index, problem)
            return False
        self.mark_held(index)
        return True

    def check(self, index: int) -> str | None:
        """Why buffer(index) is not its manifest's block (None: it is): xxh3 (a bad link)
        then SHA-256 (crafted to pass xxh3). Reads the buffer only, and hashlib and xxhash
        release the GIL, so a receiver runs it on a thread off its event loop while the
        next block arrives (multicast/fetch.py); then `mark_held` on the loop."""
        self._check_index(index)
        block, buffer = self.manifest.blocks[index], self._buffers[index]
        if (actual := checksum(buffer)) != block.checksum:
            return f"checksum {actual}, manifest says {block.checksum}"
        if (strong := strong_hash(buffer)) != block.sha256:
            return f"sha256 {strong}, manifest says {block.sha256}"
        return None

    def mark_held(self, index: int) -> None:
        """Hold a block `check` passed, and fire the layer callbacks it completes."""
        if index in self._held:
            return
        self._held.add(index)
        self.installed_at[index] = time.monotonic()
        self._fire(*held_run(self._held, index))

    def has(self, index: int) -> bool:
        return index in self._held

    def held(self) -> list[int]:
        return sorted(self._held)

    def missing(self) -> list[int]:
        return [i for i in range(self.num_blocks) if i not in self._held]

    def held_bytes(self) -> int:
        """Bytes of the blocks held (every buffer is allocated; these hold model data)."""
        return sum(self.manifest.blocks[i].nbytes for i in self.held())

    def complete(self) -> bool:
        return len(self._held) == self.num_blocks

    def ready_layers(self) -> list[tuple[int, int]]:
        """Half-open layer ranges covered by the maximal runs of held blocks, ascending."""
        return [self._layers(lo, hi) for lo, hi in held_runs(self._held)]

    def on_layers_ready(self, callback: LayersReady) -> None:
        """Register callback(layer_start, layer_end); see the module docstring."""
        self._callbacks.append(callback)
        for start, end in self.ready_layers():
            self._call(callback, start, end)

    def tensors(self, index: int) -> dict[str, torch.Tensor]:
        """Zero-copy torch views of an installed block's tensors."""
        if index not in self._held:
            raise ValueError(f"block {index} is not installed")
        return unpack_block(self.manifest.blocks[index], self._buffers[index])

    def write_model_dir(self, out_dir: Path) -> None:
        """Write an HF-style directory: config.json, extras, one safetensors per block."""
        if not self.complete():
            raise ValueError(f"cannot write an incomplete model; missing blocks {self.missing()}")
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        n = self.num_blocks
        weight_map: dict[str, str] = {}
        total = 0
        for block, buf in zip(self.manifest.blocks, self._buffers, strict=True):
            name = (
                "model.safetensors"
                if n == 1
                else f"model-{block.index + 1:05d}-of-{n:05d}.safetensors"
            )
            entries = [
                (t.name, t.dtype, t.shape, buf[t.offset : t.offset + t.nbytes])
                for t in block.tensors
            ]
            total += write_safetensors(out_dir / name, entries)
            weight_map.update({t.name: name for t in block.tensors})
        if n > 1:
            index_doc = {"metadata": {"total_size": total}, "weight_map": weight_map}
            (out_dir / "model.safetensors.index.json").write_text(json.dumps(index_doc, indent=2))
        (out_dir / "config.json").write_text(json.dumps(self.manifest.config, indent=2) + "\n")
        for file_name, text in self.manifest.extras.items():
            (out_dir / Path(file_name).name).write_text(text, encoding="utf-8")

    def _layers(self, lo: int, hi: int) -> tuple[int, int]:
        return self.manifest.blocks[lo].layer_start, self.manifest.blocks[hi].layer_end

    def _fire(self, lo: int, hi: int) -> None:
        start, end = self._layers(lo, hi)
        for callback in list(self._callbacks):
            self._call(callback, start, end)

    @staticmethod
    def _call(callback: LayersReady, start: int, end: int) -> None:
        try:
            callback(start, end)
        except Exception:
            log.exception("layers-ready callback failed for layers [%d, %d)", start, end)

    def _check_index(self, index: int) -> None:
        if not 0 <= index < len(self._buffers):
            raise IndexError(f"block {index} out of range 0..{len(self._buffers) - 1}")
