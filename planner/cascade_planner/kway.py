"""λScale's k-way binomial pipeline placed on the fabric (λScale §4.2, Algorithm 1).

`binomial_schedule` (binomial.py) splits the targets into k contiguous sub-groups and
runs one binomial pipeline per sub-group with circular-shift block orders; which pods
share a sub-group is left to the caller. Here the targets are ordered by
(zone, leaf, NVLink domain, node, pod) first, so a sub-group is a run of neighbours and
most of its transfers stay under one leaf, and each sub-group gets the source that
shares the most leaves with it (fastest source first among equals). The binomial
pipeline itself moves one block per node per step, so NVLink peers are not collapsed
into one receiver as in BlitzScale; transfers between them still run at NVLink rates
in the flow model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cascade_planner.binomial import (
    BinomialSchedule,
    SubGroup,
    schedule_of,
    split_targets,
    subgroups,
)
from cascade_planner.blitz import SourceOffer
from cascade_planner.topology import Topology


def kway_plan(
    offers: Sequence[SourceOffer],
    targets: Sequence[str],
    num_blocks: int,
    k: int,
    topo: Topology,
    pod_node: Mapping[str, str],
) -> BinomialSchedule:
    """Binomial pipeline from k of the offered sources (fastest first) to the targets."""
    return schedule_of(kway_groups(offers, targets, num_blocks, k, topo, pod_node), num_blocks)


def kway_groups(
    offers: Sequence[SourceOffer],
    targets: Sequence[str],
    num_blocks: int,
    k: int,
    topo: Topology,
    pod_node: Mapping[str, str],
) -> list[SubGroup]:
    """`kway_plan`'s sub-groups alone: enough to time the plan (binomial_time.py)."""

    def key(pod: str) -> tuple[str, str, str, str, str]:
        i = topo.info(pod_node.get(pod, pod))
        return (i.zone, i.leaf, i.domain, i.name, pod)

    ordered = sorted(targets, key=key)
    slices = split_targets(ordered, k)
    pool = [o.pod for o in offers[:k]]
    leaf = {p: topo.info(pod_node.get(p, p)).leaf_key for p in [*pool, *ordered]}
    chosen: list[str] = []
    for part in slices:
        count: dict[tuple[str, str], int] = {}
        for t in part:
            count[leaf[t]] = count.get(leaf[t], 0) + 1
        best = max(pool, key=lambda s: count.get(leaf[s], 0))  # first among equals
        chosen.append(best)
        pool.remove(best)
    return subgroups(chosen, ordered, num_blocks, k)
