"""Wrap a chain or binomial plan into a ScalePlan spec, with a flow-model estimate.

The spec is what the operator writes and what every worker's multicast executor reads
(`python -m cascade_worker.multicast.node --plan plan.json`), so a plan is inspectable
with kubectl and replayable in a benchmark without the planner.

Estimate (one NIC rate B for every pod, both directions independent):
- chain: M/B for the bandwidth term plus one chunk per hop to fill the pipeline;
- binomial: steps x (largest block)/B, since a step lasts as long as its biggest block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cascade_api.scaleplan import Block, PlanStrategy, ScalePlanSpec, Source
from cascade_planner.binomial import binomial_schedule
from cascade_planner.chains import chain_plan

# The executor's chunk (the worker's multicast NodeOptions.chunk_bytes, 512 KiB since
# issue 15's sweep): a chain hop's store-and-forward fill.
DEFAULT_CHUNK_BYTES = 512 << 10


def plan_spec(
    strategy: PlanStrategy | str,
    sources: Sequence[Source],
    targets: Sequence[str],
    blocks: Sequence[Block],
    *,
    deployment: str,
    model_digest: str,
    k: int | None = None,
    leaf_of: Mapping[str, str] | None = None,
    shift: bool = False,
    nic_bytes_per_s: float | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> ScalePlanSpec:
    """A complete ScalePlanSpec using the first k sources (default: all)."""
    strategy = PlanStrategy(strategy)
    k = len(sources) if k is None else k
    if not 1 <= k <= len(sources):
        raise ValueError(f"k={k} needs 1 <= k <= {len(sources)} sources")
    used = list(sources[:k])
    pods = [s.pod for s in used]
    spec = ScalePlanSpec(
        deployment=deployment,
        model_digest=model_digest,
        blocks=list(blocks),
        sources=used,
        targets=list(targets),
        strategy=strategy,
    )
    indices = [b.index for b in blocks]
    if strategy == PlanStrategy.CHAIN:
        spec.chains = chain_plan(pods, targets, indices, leaf_of=leaf_of, shift=shift)
    else:
        if indices != list(range(len(indices))):
            raise ValueError("binomial plans need blocks numbered 0..b-1")
        schedule = binomial_schedule(pods, targets, len(indices), k)
        spec.schedule = schedule.steps
        spec.block_orders = schedule.block_orders
    if nic_bytes_per_s:
        spec.predicted_completion_seconds = estimate_seconds(spec, nic_bytes_per_s, chunk_bytes)
    return spec


def estimate_seconds(
    spec: ScalePlanSpec, nic_bytes_per_s: float, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> float:
    """Flow-model completion time of the plan at NIC rate B (bytes/s)."""
    if nic_bytes_per_s <= 0:
        raise ValueError("nic_bytes_per_s must be positive")
    size = {b.index: b.bytes for b in spec.blocks}
    if spec.strategy == PlanStrategy.CHAIN:
        times = []
        for chain in spec.chains:
            carried = chain.blocks or list(size)
            total = sum(size[i] for i in carried)
            fill = len(chain.hops) * min(chunk_bytes, max(size.values(), default=0))
            times.append((total + fill) / nic_bytes_per_s)
        return max(times, default=0.0)
    largest = max(size.values(), default=0)
    return len(spec.schedule) * largest / nic_bytes_per_s
