"""BlitzScale-style serial-forwarding chains: source → t1 → t2 → … .

A chain moves the whole model into every hop in about M/B plus a small fill time: each
hop forwards what it has received while it receives the rest, so every link carries the
model once and no NIC sends more than one copy. Several sources give several chains;
targets are split so chain lengths differ by at most one (the fill time grows with
length, the bandwidth term does not).

Topology: with `leaf_of` (pod → leaf switch) a source takes targets on its own leaf
first and each chain visits one leaf's pods consecutively, so a chain crosses the spine
as few times as possible and chains interfere less. Without it, targets keep the
caller's order (callers may sort them by link speed, as BlitzScale does).

Block order: with `shift=True` chain i carries the blocks in the k-way circular-shift
order (chain i starts at block i·⌈b/k⌉), so receivers on different chains hold
different layers early and can form execution pipelines; by default every chain sends
blocks in layer order (best for a single new instance that runs its first layers early).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cascade_api.scaleplan import Chain
from cascade_planner.orders import circular_shift_orders


def _quotas(num_targets: int, k: int) -> list[int]:
    base, extra = divmod(num_targets, k)
    return [base + (1 if i < extra else 0) for i in range(k)]


def _assign(
    sources: Sequence[str], targets: Sequence[str], leaf_of: Mapping[str, str] | None
) -> list[list[str]]:
    k = len(sources)
    quotas = _quotas(len(targets), k)
    if not leaf_of:
        out, start = [], 0
        for q in quotas:
            out.append(list(targets[start : start + q]))
            start += q
        return out
    remaining = list(targets)
    hops: list[list[str]] = [[] for _ in sources]
    # Pass 1: each source takes targets on its own leaf.
    for i, src in enumerate(sources):
        leaf = leaf_of.get(src)
        for t in [t for t in remaining if leaf is not None and leaf_of.get(t) == leaf]:
            if len(hops[i]) < quotas[i]:
                hops[i].append(t)
                remaining.remove(t)
    # Pass 2: fill the quotas leaf by leaf, so one leaf's pods stay together.
    remaining.sort(key=lambda t: (leaf_of.get(t, ""), targets.index(t)))
    for i in range(k):
        while len(hops[i]) < quotas[i] and remaining:
            hops[i].append(remaining.pop(0))
    return hops


def chain_plan(
    sources: Sequence[str],
    targets: Sequence[str],
    blocks: int | Sequence[int],
    *,
    leaf_of: Mapping[str, str] | None = None,
    shift: bool = False,
) -> list[Chain]:
    """One chain per source (sources beyond the number of targets get none)."""
    if not sources:
        raise ValueError("need at least one source")
    if len(set(sources) | set(targets)) != len(sources) + len(targets):
        raise ValueError("sources and targets must be distinct pods")
    block_list = list(range(blocks)) if isinstance(blocks, int) else list(blocks)
    used = list(sources[: max(1, min(len(sources), len(targets)))])
    if shift:
        positions = circular_shift_orders(len(block_list), len(used))
        orders = [[block_list[p] for p in order] for order in positions]
    else:
        orders = [list(block_list) for _ in used]
    chains: list[Chain] = []
    for src, hops, order in zip(used, _assign(used, targets, leaf_of), orders, strict=True):
        if hops:
            chains.append(Chain(source=src, hops=hops, blocks=order))
    return chains
