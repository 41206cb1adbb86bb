"""Who sends to whom in each method, and the plans for the baselines (pure).

Pods are named bench-0..bench-{N-1}; the first k are sources (they hold the model), the
rest receive. Naive parallel unicast is expressed as a chain plan whose chains are one hop
long, every receiver fed directly by a source (round-robin over k sources), so it runs on
exactly the executor and transport the Cascade plans use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cascade_api.scaleplan import Block, Chain, PlanStrategy, ScalePlanSpec, Source, SourceTier

MB = 1_000_000
MIB = 1 << 20


def target_mib(model_mb: float) -> float:
    """`cascade model init --target-mb` counts MiB; the benchmark's --model-mb counts 10^6
    bytes (like Mbit/s), so 200 MB at 200 Mbit/s is an 8 s bound."""
    return model_mb * MB / MIB


def split_roles(pods: Sequence[str], k: int) -> tuple[list[str], list[str]]:
    """(sources, receivers): the first k pods hold the model."""
    if not 1 <= k < len(pods):
        raise ValueError(f"need 1 <= k < nodes, got k={k} with {len(pods)} nodes")
    return list(pods[:k]), list(pods[k:])


def unicast_chains(sources: Sequence[str], receivers: Sequence[str]) -> list[Chain]:
    """One single-hop chain per receiver, sources taking receivers in turn."""
    return [Chain(source=sources[i % len(sources)], hops=[r]) for i, r in enumerate(receivers)]


def unicast_plan(base: ScalePlanSpec, sources: Sequence[str]) -> ScalePlanSpec:
    """The chain plan `base` (same blocks, sources, targets) rewired as parallel unicast."""
    return base.model_copy(
        update={
            "strategy": PlanStrategy.CHAIN,
            "chains": unicast_chains(sources, base.targets),
            "schedule": [],
            "execution_pipelines": [],
            "predicted_completion_seconds": None,
        }
    )


def host_sources(sources: Sequence[str]) -> list[Source]:
    """Benchmark sources hold the model in host memory (no GPU here)."""
    return [Source(pod=s, tier=SourceTier.HOST) for s in sources]


def blocks_table(blocks: Sequence[Mapping[str, object]]) -> list[Block]:
    """ScalePlan block table from manifest-like rows (index, layer range, nbytes, checksum)."""
    return [
        Block(
            index=int(str(b["index"])),
            layer_start=int(str(b["layer_start"])),
            layer_end=int(str(b["layer_end"])),
            bytes=int(str(b["nbytes"])),
            checksum=str(b["checksum"]),
        )
        for b in blocks
    ]


def peer_map(addresses: Mapping[str, str], port: int) -> dict[str, str]:
    """pod name -> HOST:PORT where its multicast node listens."""
    return {name: f"{ip}:{port}" for name, ip in addresses.items()}
