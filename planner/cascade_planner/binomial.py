"""λScale's binomial-pipeline multicast over named pods, with k sources.

k → N scaling: the targets are split into k contiguous sub-groups of near-equal size,
one per source, and each sub-group runs a 1 → L binomial pipeline (see hypercube.py)
over its own block order: the k-way circular shift of orders.py, so sub-group i starts
at block i·⌈b/k⌉. Sub-groups are disjoint, so their steps run side by side and step s of
the plan is the union of every sub-group's step s. In every step each pod sends at most
one block and receives at most one (tests replay this with simulate.py).

Steps: b + ⌈log2 L⌉ - 1 for the largest sub-group size L (source included) when L is a
power of two, at most b + ⌈log2 L⌉ otherwise (`step_bound`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cascade_api.scaleplan import BlockOrder, Step, Transfer
from cascade_planner.hypercube import cached_schedule
from cascade_planner.orders import circular_shift_orders


@dataclass(frozen=True)
class SubGroup:
    source: str
    targets: list[str]
    order: list[int]  # block indices in this sub-group's send order


@dataclass(frozen=True)
class BinomialSchedule:
    steps: list[Step]
    block_orders: list[BlockOrder]
    groups: list[SubGroup]
    bound: int  # documented upper bound on len(steps)

    def transfers_of(self, pod: str) -> list[tuple[int, Transfer]]:
        """(step index, transfer) for every transfer `pod` sends or receives, in order."""
        return [
            (index, tr)
            for index, step in enumerate(self.steps)
            for tr in step.transfers
            if pod in (tr.sender, tr.receiver)
        ]


def step_bound(group_size: int, num_blocks: int) -> int:
    """Max steps for one sub-group of `group_size` pods (source included)."""
    if group_size < 2 or num_blocks == 0:
        return 0
    log = math.ceil(math.log2(group_size))
    exact = 1 << log == group_size
    return num_blocks + log - (1 if exact else 0)


def split_targets(targets: Sequence[str], k: int) -> list[list[str]]:
    """k contiguous slices whose sizes differ by at most one (larger ones first)."""
    base, extra = divmod(len(targets), k)
    out: list[list[str]] = []
    start = 0
    for i in range(k):
        size = base + (1 if i < extra else 0)
        out.append(list(targets[start : start + size]))
        start += size
    return out


def binomial_schedule(
    sources: Sequence[str], targets: Sequence[str], num_blocks: int, k: int | None = None
) -> BinomialSchedule:
    """Binomial-pipeline steps from the first k sources (default: all) to the targets."""
    k = len(sources) if k is None else k
    return schedule_of(subgroups(sources, targets, num_blocks, k), num_blocks)


def subgroups(
    sources: Sequence[str], targets: Sequence[str], num_blocks: int, k: int
) -> list[SubGroup]:
    """The k sub-groups `binomial_schedule` runs: contiguous target slices, shifted orders."""
    if not 1 <= k <= len(sources):
        raise ValueError(f"k={k} needs 1 <= k <= {len(sources)} sources")
    pods = list(sources[:k]) + list(targets)
    if len(set(pods)) != len(pods):
        raise ValueError("sources and targets must be distinct pods")
    if num_blocks < 0:
        raise ValueError("num_blocks must be >= 0")
    orders = circular_shift_orders(num_blocks, k)
    return [
        SubGroup(source=src, targets=tgts, order=order)
        for src, tgts, order in zip(sources[:k], split_targets(targets, k), orders, strict=True)
    ]


def schedule_of(groups: Sequence[SubGroup], num_blocks: int) -> BinomialSchedule:
    """The sub-groups' binomial pipelines side by side: step s is every group's step s."""
    merged: list[list[Transfer]] = []
    for group in groups:
        names = [group.source, *group.targets]
        for index, step in enumerate(cached_schedule(len(names), num_blocks)):
            while len(merged) <= index:
                merged.append([])
            merged[index].extend(
                Transfer(sender=names[s], receiver=names[r], block=group.order[b])
                for s, r, b in step
            )
    bound = max((step_bound(1 + len(g.targets), num_blocks) for g in groups), default=0)
    return BinomialSchedule(
        steps=[Step(transfers=t) for t in merged],
        block_orders=[BlockOrder(source=g.source, order=g.order) for g in groups],
        groups=list(groups),
        bound=bound,
    )
