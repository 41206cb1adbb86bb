"""Step times of a k-way binomial plan from its index schedules, not its Transfer objects.

Why: 512 targets make a plan of about 16,000 transfers. Building them as API objects and
walking them link by link (flow.predict_steps) took about 60 ms, while `auto` only needs
the plan's completion to compare it with the chain plan's. Here the same numbers come
from the sub-groups and the cached index schedules (hypercube.py), in a few ms.

Same floats as predict_steps: a step lasts max over links of load * (1 / capacity), and
loads are integer byte sums, so the order they are added in does not matter. In a step
each pod sends at most one block and receives at most one (checked per index schedule),
so a node-level link (NIC or NVLink, either way) of a node that hosts a single pod of
the plan carries one transfer: its term is size * 1/capacity, and the step's maximum
over those is max(size * w) over its transfers (w: the larger inverse capacity of the
pair's two node links), computed by `map` at C speed. The other links (leaf and zone
uplinks, node links of nodes hosting several pods) are counted per step: with one block
size in the step the load is count * size exactly; otherwise count * the largest size
bounds it, and only a step where that bound could raise the maximum is summed transfer
by transfer. A pair's links follow Topology.path's rule, applied to whole lanes at once;
pairs with a shared node, or across zones with a zone limit, call Topology.path itself
(tests/unit/test_planner_fastpaths.py compares the result with predict_steps).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import eq, itemgetter, mul, ne, or_
from typing import Any

from cascade_planner.binomial import SubGroup
from cascade_planner.hypercube import cached_schedule
from cascade_planner.topology import Link, NodeInfo, Topology

Take = Callable[[Sequence[Any]], tuple[Any, ...]]


@dataclass(frozen=True)
class _Step:
    ids: tuple[int, ...]  # pair ids of its transfers
    positions: tuple[int, ...]  # their block positions (in the group's order)
    take_ids: Take  # values[ids], at C speed
    take_positions: Take


def _taker(idx: Sequence[int]) -> Take:
    if len(idx) == 1:
        return lambda values: (values[idx[0]],)
    return itemgetter(*idx) if idx else lambda values: ()


@dataclass(frozen=True)
class IndexSteps:
    """One (group size, blocks) index schedule, arranged for timing."""

    pairs: list[tuple[int, int]]  # distinct (sender, receiver) indices
    senders: Take  # values[sender of each pair]
    receivers: Take
    steps: list[_Step | None]  # None: no transfer in that step
    one_each: bool  # every index sends at most one block and receives at most one per step
    first: list[list[tuple[int, int]]]  # per index: (block position, step it first arrives)
    last: int | None  # the step by which every receiver holds every block; None: never


@functools.lru_cache(maxsize=256)
def index_steps(n: int, num_blocks: int) -> IndexSteps:
    pair_id: dict[tuple[int, int], int] = {}
    steps: list[_Step | None] = []
    one_each = True
    seen: dict[tuple[int, int], int] = {}
    for t, step in enumerate(cached_schedule(n, num_blocks)):
        ids = tuple(pair_id.setdefault((s, r), len(pair_id)) for s, r, _ in step)
        positions = tuple(b for _, _, b in step)
        steps.append(_Step(ids, positions, _taker(ids), _taker(positions)) if step else None)
        one_each &= len({s for s, _, _ in step}) == len({r for _, r, _ in step}) == len(step)
        for _, r, b in step:
            seen.setdefault((r, b), t)
    first: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for (r, b), t in seen.items():
        first[r].append((b, t))
    last = max(seen.values(), default=0) if len(seen) == (n - 1) * num_blocks else None
    pairs = list(pair_id)
    senders, receivers = _taker([s for s, _ in pairs]), _taker([r for _, r in pairs])
    return IndexSteps(pairs, senders, receivers, steps, one_each, first, last)


class _Links:
    """Link ids and 1/capacity per id, as predict_steps keeps them."""

    def __init__(self, topo: Topology) -> None:
        self.ids: dict[Link, int] = {}
        self.inv: list[float] = []
        self.capacity = topo.capacity
        self.leaves: dict[tuple[str, str], tuple[int, int]] = {}

    def id(self, link: Link) -> int:
        found = self.ids.get(link)
        if found is None:
            found = self.ids[link] = len(self.inv)
            self.inv.append(1.0 / self.capacity(link))
        return found

    def uplinks(self, info: NodeInfo) -> tuple[int, int]:
        """Ids of the links from the node's leaf to its zone and back."""
        found = self.leaves.get(info.leaf_key)
        if found is None:
            leaf, zone = ("leaf", info.leaf_key), ("zone", info.zone)
            found = self.leaves[info.leaf_key] = (self.id((leaf, zone)), self.id((zone, leaf)))
        return found


@dataclass(frozen=True)
class _Lane:
    """One sub-group on the fabric: per pair id its w and summed link ids."""

    w: list[float]
    summed: list[tuple[int, ...]]
    any_summed: bool
    sizes: list[int]  # bytes per block position
    size: int | None  # the one size of every block, if they are one size


def _lane(
    nodes: Sequence[str], shared: Sequence[bool], plan: IndexSteps, topo: Topology, links: _Links
) -> tuple[list[float], list[tuple[int, ...]]]:
    """(w, summed link ids) per pair of `plan`, the links Topology.path picks: over
    NVLink inside a domain, else NIC out, the leaves' uplinks when the leaves differ, NIC
    in. Whole lanes at C speed (`map`); pairs with a shared node or across zones with a
    zone limit go through `_pair` (Topology.path itself)."""
    info = [topo.info(n) for n in nodes]
    cap, pods = links.capacity, list(zip(nodes, info, strict=True))
    sender, receiver = plan.senders, plan.receivers
    nic = map(
        max,
        sender([1.0 / cap((("node", n), ("leaf", i.leaf_key))) for n, i in pods]),
        receiver([1.0 / cap((("leaf", i.leaf_key), ("node", n))) for n, i in pods]),
    )
    nvl = map(
        max,
        sender([1.0 / cap((("node", n), ("nvl", i.domain))) for n, i in pods]),
        receiver([1.0 / cap((("nvl", i.domain), ("node", n))) for n, i in pods]),
    )
    domains, leaves = [i.domain for i in info], [i.leaf_key for i in info]
    inside = list(map(eq, sender(domains), receiver(domains)))
    w = [v if x else u for u, v, x in zip(nic, nvl, inside, strict=True)]
    ups = [links.uplinks(i) for i in info]
    cross = map(ne, sender(leaves), receiver(leaves))
    summed: list[tuple[int, ...]] = [
        (u[0], d[1]) if x and not y else ()
        for u, d, x, y in zip(sender(ups), receiver(ups), cross, inside, strict=True)
    ]
    special: Iterable[bool] = ()
    if any(shared):
        special = map(or_, sender(shared), receiver(shared))
    if topo.params.zone_mbit is not None and len({i.zone for i in info}) > 1:
        zones = [i.zone for i in info]
        apart = map(ne, sender(zones), receiver(zones))
        special = map(or_, special, apart) if any(shared) else apart
    for k, x in enumerate(special):
        if x:
            s, r = plan.pairs[k]
            w[k], summed[k] = _pair(nodes, info, shared, s, r, topo, links)
    return w, summed


def _pair(
    nodes: Sequence[str],
    info: Sequence[NodeInfo],
    shared: Sequence[bool],
    s: int,
    r: int,
    topo: Topology,
    links: _Links,
) -> tuple[float, tuple[int, ...]]:
    """(w over the pair's single-use node links, ids of its summed links)."""
    route = topo.path(nodes[s], nodes[r])
    first, middle, last = route[0], route[1:-1], route[-1]
    summed = [links.id(link) for link in middle]
    w = 0.0
    for link, many in ((first, shared[s]), (last, shared[r])):
        if many:
            summed.append(links.id(link))
        else:
            w = max(w, 1.0 / links.capacity(link))
    return w, tuple(summed)


def step_ends(
    groups: Sequence[SubGroup],
    size_of: Mapping[int, int],
    topo: Topology,
    pod_node: Mapping[str, str],
    num_blocks: int,
    hop_latency_s: float = 0.0,
) -> list[float]:
    """End time of each step of the plan these sub-groups make (binomial_schedule's
    steps, in its order), as flow.predict_steps gives it; `size_of`: block -> bytes."""
    nodes = [[pod_node.get(p, p) for p in (g.source, *g.targets)] for g in groups]
    hosted = Counter(n for ns in nodes for n in ns)
    links = _Links(topo)
    plans = [index_steps(len(ns), num_blocks) for ns in nodes]
    lanes = []
    for g, ns, plan in zip(groups, nodes, plans, strict=True):
        shared = [hosted[n] > 1 or not plan.one_each for n in ns]
        w, summed = _lane(ns, shared, plan, topo, links)
        sizes = [size_of[b] for b in g.order]
        one = sizes[0] if sizes and min(sizes) == max(sizes) else None
        lanes.append(_Lane(w, summed, any(summed), sizes, one))
    ends: list[float] = []
    t = 0.0
    for step in range(max((len(p.steps) for p in plans), default=0)):
        parts = []
        for lane, plan in zip(lanes, plans, strict=True):
            found = plan.steps[step] if step < len(plan.steps) else None
            if found is not None:
                parts.append((lane, found))
        if parts:
            t += _step_max(parts, links.inv) + hop_latency_s
        ends.append(t)
    return ends


def _step_max(parts: Sequence[tuple[_Lane, _Step]], inv: Sequence[float]) -> float:
    """max over the step's links of load * 1/capacity (module docstring)."""
    top = 0.0
    counted: Counter[int] = Counter()
    small, large = math.inf, 0
    for lane, st in parts:
        if lane.size is not None:  # size * max(w) is max(size * w): rounding is monotone
            top = max(top, lane.size * max(st.take_ids(lane.w)))
            small, large = min(small, lane.size), max(large, lane.size)
        else:
            sizes = st.take_positions(lane.sizes)
            top = max(top, max(map(mul, sizes, st.take_ids(lane.w))))
            small, large = min(small, min(sizes)), max(large, max(sizes))
        if lane.any_summed:
            counted.update(chain.from_iterable(st.take_ids(lane.summed)))
    if not counted:
        return top
    bound = max((k * large) * inv[i] for i, k in counted.items())
    if bound <= top or small == large:  # one size: the bound is the exact term
        return max(top, bound)
    load: dict[int, int] = {}
    for lane, st in parts:
        for pid, position in zip(st.ids, st.positions, strict=True):
            for i in lane.summed[pid]:
                load[i] = load.get(i, 0) + lane.sizes[position]
    return max(top, max(v * inv[i] for i, v in load.items()))


def arrivals(
    groups: Sequence[SubGroup], num_blocks: int, ends: Sequence[float], pos: Mapping[int, int]
) -> dict[str, list[float]]:
    """Target -> seconds until it holds each block position (its first copy's step)."""
    out: dict[str, list[float]] = {}
    for g in groups:
        plan = index_steps(1 + len(g.targets), num_blocks)
        for r, pod in enumerate(g.targets, start=1):
            row = [math.inf] * num_blocks
            for b, t in plan.first[r]:
                row[pos[g.order[b]]] = ends[t]
            out[pod] = row
    return out


def completion(groups: Sequence[SubGroup], num_blocks: int, ends: Sequence[float]) -> float:
    """Seconds until every target holds every block: the end of the last step that
    brings a target a block it lacks (ends only grow)."""
    last = [index_steps(1 + len(g.targets), num_blocks).last for g in groups if g.targets]
    if any(t is None for t in last):
        return math.inf
    return max((ends[t] for t in last if t is not None), default=0.0)
