"""Run a whole plan inside one process: synthetic models, plan blocks, node wiring.

Tests and quick experiments start several MulticastNodes on one event loop (each with
its own UCX listener on loopback); the benchmark uses `plan_blocks` to turn a packed
model's manifest into the block table of a ScalePlan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cascade_api.scaleplan import Block, ScalePlanSpec, Source, SourceTier
from cascade_planner.spec import plan_spec
from cascade_worker.blocks.manifest import (
    BlockManifest,
    ModelManifest,
    checksum,
    model_digest,
    strong_hash,
)
from cascade_worker.blocks.store import BlockStore
from cascade_worker.multicast.result import NodeResult
from cascade_worker.multicast.runner import MulticastNode, NodeOptions


def plan_blocks(manifest: ModelManifest) -> list[Block]:
    """The ScalePlan block table for a model manifest."""
    return [
        Block(
            index=b.index,
            layer_start=b.layer_start,
            layer_end=b.layer_end,
            bytes=b.nbytes,
            checksum=b.checksum,
        )
        for b in manifest.blocks
    ]


def synthetic_model(
    num_blocks: int, block_bytes: int, seed: int = 0
) -> tuple[ModelManifest, list[np.ndarray]]:
    """A manifest of random blocks (one layer each, no tensors) and their buffers."""
    rng = np.random.default_rng(seed)
    buffers = [rng.integers(0, 256, block_bytes, dtype=np.uint8) for _ in range(num_blocks)]
    blocks = [
        BlockManifest(
            index=i,
            layer_start=i,
            layer_end=i + 1,
            nbytes=block_bytes,
            checksum=checksum(buf),
            sha256=strong_hash(buf),
            tensors=[],
        )
        for i, buf in enumerate(buffers)
    ]
    digest = model_digest("synthetic", num_blocks, {}, blocks, {})
    manifest = ModelManifest(
        digest=digest, arch="synthetic", num_layers=num_blocks, config={}, blocks=blocks
    )
    return manifest, buffers


def source_store(manifest: ModelManifest, buffers: list[np.ndarray]) -> BlockStore:
    """A complete store over private copies of `buffers` (each source owns its bytes)."""
    return BlockStore.from_buffers(manifest, [b.copy() for b in buffers])


async def start_nodes(
    spec: ScalePlanSpec,
    stores: Mapping[str, BlockStore | None],
    options: NodeOptions | Mapping[str, NodeOptions] | None = None,
) -> tuple[dict[str, MulticastNode], dict[str, str]]:
    """Create and start one node per pod in `stores`; returns (nodes, peers)."""
    nodes: dict[str, MulticastNode] = {}
    for pod, store in stores.items():
        opts = options.get(pod) if isinstance(options, Mapping) else options
        nodes[pod] = MulticastNode(spec, pod, store, options=opts)
    peers = {pod: await node.start() for pod, node in nodes.items()}
    return nodes, peers


async def run_nodes(
    nodes: Mapping[str, MulticastNode], peers: Mapping[str, str]
) -> dict[str, NodeResult | BaseException]:
    """Run every node to the end; a node that failed or was killed maps to its exception."""
    tasks = {pod: asyncio.ensure_future(node.run(peers)) for pod, node in nodes.items()}
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    out: dict[str, NodeResult | BaseException] = {}
    for pod, task in tasks.items():
        if task.cancelled():
            out[pod] = asyncio.CancelledError()
        else:
            exc = task.exception()
            out[pod] = exc if exc is not None else task.result()
    return out


Scenario = Callable[[dict[str, MulticastNode], dict[str, BlockStore]], Coroutine[Any, Any, None]]


@dataclass
class LocalRun:
    spec: ScalePlanSpec
    buffers: list[np.ndarray]  # the model's true bytes
    stores: dict[str, BlockStore]
    results: dict[str, NodeResult | BaseException]


def run_local(strategy: str, sources: int, targets: int, **options: Any) -> LocalRun:
    """Plan and run s0..s{k-1} -> t0..t{n-1} in this process (sources alternate gpu/host);
    `options` are `run_local_async`'s. `scenario(nodes, stores)` runs alongside the
    transfer (kill a node, watch a store)."""
    return asyncio.run(run_local_async(strategy, sources, targets, **options))


async def run_local_async(
    strategy: str,
    sources: int,
    targets: int,
    *,
    num_blocks: int = 8,
    block_bytes: int = 256 * 1024,
    options: NodeOptions | Mapping[str, NodeOptions] | None = None,
    scenario: Scenario | None = None,
    shift: bool = False,
    seed: int = 0,
) -> LocalRun:
    """`run_local` on the running loop: several runs in one process share UCX's
    context, which stays bound to the loop that first used it."""
    manifest, buffers = synthetic_model(num_blocks, block_bytes, seed)
    srcs = [f"s{i}" for i in range(sources)]
    tgts = [f"t{i}" for i in range(targets)]
    tiers = [SourceTier.GPU, SourceTier.HOST]
    spec = plan_spec(
        strategy,
        [Source(pod=s, tier=tiers[i % 2]) for i, s in enumerate(srcs)],
        tgts,
        plan_blocks(manifest),
        deployment="local",
        model_digest=manifest.digest,
        shift=shift,
    )
    stores: dict[str, BlockStore] = {s: source_store(manifest, buffers) for s in srcs}
    stores |= {t: BlockStore(manifest) for t in tgts}
    nodes, peers = await start_nodes(spec, stores, options)
    extra = asyncio.ensure_future(scenario(nodes, stores)) if scenario else None
    results = await run_nodes(nodes, peers)
    if extra is not None:
        await extra
    return LocalRun(spec, buffers, stores, results)
