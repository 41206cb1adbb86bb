"""Execution pipelines across sub-groups while blocks arrive (λScale §4.3, Algorithm 2).

Who joins whom follows Algorithm 2: while more than one sub-group has unassigned
receivers, the t-th receivers of every such sub-group form a candidate (t below the
smallest sub-group's size); when one sub-group is left, its remaining receivers form one
candidate together. With k-way circular-shift orders the t-th receivers of the k
sub-groups hold different parts of the model early, so together they cover it after
about b/k blocks instead of b.

When a candidate can start: the earliest time T at which the blocks its members hold
cover the model in layer order as contiguous stages, one stage per member. Coverage
only grows with time, so T is a binary search over the members' block arrival times;
the cover at a given time is greedy (from the first uncovered block, the unused member
holding the longest run wins): it finds the cover for circular-shift orders and never
reports one that does not exist, though contrived holdings may make it miss one. A
candidate becomes an `ExecutionPipeline` only if T is earlier than the time any of its
stage members holds the whole model (from then on that member serves alone) by at least
`lead_s`; members the cover does not need are left out. The lead is the live scale-up's
`minLeadSeconds`: setting a pipeline up (the head's KV cache, a stage on the source,
their connections) takes CPU and memory from pods that are receiving, which a window of
a fraction of a second does not repay (a 6.6 MiB plan at 200 Mbit/s, 0.3 s, ran 1.86x
its prediction with a pipeline formed, 1.06-1.18x without).

Sources may take part too (`source_stages`, for live scale-ups): a source holds every
layer from the start, so one target and one source cover the model as soon as the
target holds a prefix. With a single source the receivers alone cannot cover the model
before it has left the source once (about when the first of them completes), so this is
the only pipeline a 1 -> N scale-up on equal NICs can form early. Each source closes at
most one pipeline (a stage serves one head), with the free target that holds the first
half of the layers earliest: the target runs that half, the source the rest (two
members, balanced as Algorithm 2's pipelines are). Receiver pipelines form first; a
target in one is not free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from cascade_api.scaleplan import Block, ExecutionPipeline, Stage
from cascade_planner.flow import shown

Arrivals = Mapping[str, Sequence[float]]  # pod -> seconds until it holds block i


def cover(
    members: Sequence[str], arrivals: Arrivals, at: float, num_blocks: int
) -> list[tuple[str, int, int]] | None:
    """Stages (pod, first block, one past last block) covering every block at time `at`."""
    stages: list[tuple[str, int, int]] = []
    used: set[str] = set()
    pos = 0
    while pos < num_blocks:
        best, reach = "", pos
        for m in members:
            if m in used:
                continue
            times, end = arrivals[m], pos
            while end < num_blocks and times[end] <= at:
                end += 1
            if end > reach:
                best, reach = m, end
        if not best:
            return None
        stages.append((best, pos, reach))
        used.add(best)
        pos = reach
    return stages


def earliest_cover(
    members: Sequence[str], arrivals: Arrivals, num_blocks: int
) -> tuple[float, list[tuple[str, int, int]]] | None:
    """(earliest time, stages) at which the members' blocks cover the model."""
    times = sorted({t for m in members for t in arrivals[m] if t < math.inf})
    if not times or num_blocks == 0:
        return None
    last = cover(members, arrivals, times[-1], num_blocks)
    if last is None:
        return None
    lo, hi = 0, len(times) - 1  # invariant: covered at times[hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if cover(members, arrivals, times[mid], num_blocks) is not None:
            hi = mid
        else:
            lo = mid + 1
    found = cover(members, arrivals, times[hi], num_blocks)
    assert found is not None
    return times[hi], found


def candidates(groups: Sequence[Sequence[str]]) -> list[list[str]]:
    """λScale Algorithm 2: one receiver per sub-group, then the last sub-group's rest."""
    queues = [list(g) for g in groups if g]
    out: list[list[str]] = []
    while queues:
        if len(queues) == 1:
            out.append(queues.pop())
            break
        a = min(len(q) for q in queues)
        out.extend([q[t] for q in queues] for t in range(a))
        queues = [q[a:] for q in queues if len(q) > a]
    return out


def form_pipelines(
    groups: Sequence[Sequence[str]],
    arrivals: Arrivals,
    blocks: Sequence[Block],
    source_stages: Sequence[str] = (),
    cooperative: bool = False,
    lead_s: float = 0.0,
) -> list[ExecutionPipeline]:
    """Execution pipelines that start `lead_s` before any of their stages could serve alone;
    `source_stages`: sources that may close one pipeline each (module docstring), from
    the target's first block when `cooperative` (its split then moves per batch)."""
    complete = {pod: max(times, default=0.0) for pod, times in arrivals.items()}
    out: list[ExecutionPipeline] = []
    for members in candidates(groups):
        if len(members) < 2 or _shares_last_block(members, arrivals, complete):
            continue
        found = earliest_cover(members, arrivals, len(blocks))
        if found is None:
            continue
        ready, stages = found
        if len(stages) < 2 or ready + lead_s >= min(complete[p] for p, _, _ in stages):
            continue
        out.append(
            ExecutionPipeline(
                stages=[_stage(p, blocks[a], blocks[z - 1]) for p, a, z in stages],
                ready_seconds=shown(ready),
            )
        )
    used = {st.pod for e in out for st in e.stages}
    free = [p for g in groups for p in g if p not in used]
    for source in source_stages:
        paired = _with_source(source, free, arrivals, blocks, complete, cooperative, lead_s)
        if paired is not None:
            out.append(paired)
            free.remove(paired.stages[0].pod)
    out.sort(key=lambda e: (e.ready_seconds or 0.0, e.stages[0].pod))
    return out


def _shares_last_block(
    members: Sequence[str], arrivals: Arrivals, complete: Mapping[str, float]
) -> bool:
    """Whether one block is the last to arrive at every member (chains in one order).
    Then no pipeline of them can start early: the stage holding that block at the ready
    time is complete by then, so the search would be thrown away (skipping it is exact)."""
    first = members[0]
    last = [i for i, t in enumerate(arrivals[first]) if t == complete[first]]
    return any(all(arrivals[m][i] == complete[m] for m in members) for i in last)


def _with_source(
    source: str,
    free: Sequence[str],
    arrivals: Arrivals,
    blocks: Sequence[Block],
    complete: Mapping[str, float],
    cooperative: bool,
    lead_s: float,
) -> ExecutionPipeline | None:
    """The free target holding the first half of the layers (its first block, when
    `cooperative`) earliest, then `source`."""
    half = blocks[-1].layer_end / 2 if blocks else 0
    a = next((i + 1 for i, b in enumerate(blocks) if b.layer_end >= half), len(blocks))
    a = min(a, 1) if cooperative else a
    if not free or a >= len(blocks):
        return None  # one block: nothing to split
    ready, target = min((max(arrivals[t][:a]), t) for t in free)
    if ready + lead_s >= complete[target]:
        return None
    return ExecutionPipeline(
        stages=[_stage(target, blocks[0], blocks[a - 1]), _stage(source, blocks[a], blocks[-1])],
        ready_seconds=shown(ready),
    )


def _stage(pod: str, first: Block, last: Block) -> Stage:
    return Stage(pod=pod, layer_start=first.layer_start, layer_end=last.layer_end)
