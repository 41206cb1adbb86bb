"""BlitzScale's scale-plan generation (OSDI'25 §5.1, Algorithm 1), over named pods.

1. Group targets by NVLink domain: only the group's leader (fastest NIC in, then name)
   receives over the network; the other members follow it directly in its chain, so
   they copy from it over NVLink (a chain hop inside one domain never touches a NIC).
   A group whose domain already holds a source gets its own chain from that source.
2. Prune sources whose outbound link carries serving traffic: `serving_out[pod]` is the
   fraction of its NIC-out in use (1.0 for a plain "busy" flag); at or above
   `busy_threshold` the source is dropped, below it the source offers the rest
   (1 - load) x NIC-out. Inbound serving traffic does not interfere (links are
   bi-directional), so only the outbound share counts.
3. Greedy chains, fastest links first. Senders sit in a priority queue by offered
   bandwidth (ties: insertion order, so sources start new chains before tails extend
   old ones and chain lengths stay balanced). The popped sender takes the target with
   the best achievable rate min(offered, NIC-in); among equally good ones it prefers
   its own leaf, then a leaf no other chain is working on (starting there at that leaf's
   fastest target, so one leaf's pods stay consecutive in one chain, as chains.py does),
   then the global order. The target then
   forwards at min(received rate, its NIC-out).
   Deviation from the paper, where a target re-enters the queue with its leftover
   bandwidth and may feed several children (a tree): the workers execute chains, so
   only sources fan out (a source with a 400G NIC heads four chains of 100G targets);
   a target forwards to at most one next hop.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cascade_api.scaleplan import Chain
from cascade_planner.errors import PlanningError, PlanningReason
from cascade_planner.topology import NodeInfo, Topology

Leaf = tuple[str, str]

_EPS = 1e-9
_SCAN = 64  # targets looked at for an unclaimed leaf before taking the fastest


@dataclass(frozen=True)
class TargetGroup:
    leader: str  # receives over the network (or from a source in its domain)
    members: list[str]  # the rest of its NVLink domain, served from the leader
    domain: str


@dataclass(frozen=True)
class SourceOffer:
    pod: str
    bandwidth: float  # bytes/s it can send without hurting its serving traffic


def group_by_nvlink(
    targets: Sequence[str], topo: Topology, pod_node: Mapping[str, str]
) -> list[TargetGroup]:
    """Targets grouped by NVLink domain, in order of each group's first target."""
    by_domain: dict[str, list[str]] = {}
    for t in targets:
        by_domain.setdefault(topo.info(pod_node.get(t, t)).domain, []).append(t)
    groups = []
    for domain, pods in by_domain.items():
        leader = min(pods, key=lambda p: (-topo.info(pod_node.get(p, p)).nic_in, p))
        groups.append(TargetGroup(leader, [p for p in pods if p != leader], domain))
    return groups


def prune_sources(
    sources: Sequence[str],
    topo: Topology,
    pod_node: Mapping[str, str],
    serving_out: Mapping[str, float],
    busy_threshold: float,
) -> tuple[list[SourceOffer], list[str]]:
    """(usable sources by offered bandwidth, fastest first; pruned pods)."""
    kept: list[SourceOffer] = []
    pruned: list[str] = []
    for s in sources:
        load = min(1.0, max(0.0, serving_out.get(s, 0.0)))
        if load >= busy_threshold:
            pruned.append(s)
            continue
        kept.append(SourceOffer(s, topo.info(pod_node.get(s, s)).nic_out * (1.0 - load)))
    kept.sort(key=lambda o: -o.bandwidth)  # stable: ties keep the caller's order
    if not kept and pruned:
        raise PlanningError(
            PlanningReason.SOURCES_BUSY,
            f"every source is at or above the busy threshold {busy_threshold:g}: "
            + ", ".join(pruned),
        )
    return kept, pruned


class _Pool:
    """Remaining target groups, by NIC-in (fastest first), overall and per leaf."""

    def __init__(self, groups: Sequence[TargetGroup], info: Mapping[str, NodeInfo]) -> None:
        self.rate = {g.leader: info[g.leader].nic_in for g in groups}
        self.leaf = {g.leader: info[g.leader].leaf_key for g in groups}
        key = lambda g: (-self.rate[g.leader], self.leaf[g.leader], g.leader)  # noqa: E731
        self.order = sorted(groups, key=key)
        self.by_leaf: dict[Leaf, list[TargetGroup]] = {}
        for g in self.order:
            self.by_leaf.setdefault(self.leaf[g.leader], []).append(g)
        self.remaining = {leaf: len(gs) for leaf, gs in self.by_leaf.items()}
        self.head = 0
        self.leaf_head = dict.fromkeys(self.by_leaf, 0)
        self.taken: set[str] = set()
        self.left = len(self.order)

    def _first(self, leaf: Leaf) -> TargetGroup | None:
        if leaf not in self.by_leaf:
            return None
        lst, i = self.by_leaf[leaf], self.leaf_head[leaf]
        while i < len(lst) and lst[i].leader in self.taken:
            i += 1
        self.leaf_head[leaf] = i
        return lst[i] if i < len(lst) else None

    def _best(self) -> TargetGroup:
        while self.order[self.head].leader in self.taken:
            self.head += 1
        return self.order[self.head]

    def pick(self, offered: float, leaf: Leaf, claimed: Mapping[Leaf, int]) -> TargetGroup:
        """Best achievable rate first; then own leaf, an unclaimed leaf, the global order."""
        best = self._best()
        floor = min(offered, self.rate[best.leader]) * (1 - _EPS)
        local = self._first(leaf)
        if local is not None and min(offered, self.rate[local.leader]) >= floor:
            return local
        # Else the fastest target on a leaf no chain is working on (a bounded scan of
        # the global order, whose achievable rates only fall), else the fastest.
        i, scanned = self.head, 0
        while i < len(self.order) and scanned < _SCAN:
            g = self.order[i]
            i += 1
            if g.leader in self.taken:
                continue
            if min(offered, self.rate[g.leader]) < floor:
                break
            scanned += 1
            if not claimed.get(self.leaf[g.leader]):
                return self._first(self.leaf[g.leader]) or g
        return best

    def take(self, g: TargetGroup) -> None:
        self.taken.add(g.leader)
        self.remaining[self.leaf[g.leader]] -= 1
        self.left -= 1


def greedy_chains(
    offers: Sequence[SourceOffer],
    groups: Sequence[TargetGroup],
    topo: Topology,
    pod_node: Mapping[str, str],
    blocks: Sequence[int],
) -> list[Chain]:
    """Algorithm 1's greedy over group leaders, then members expanded after leaders.
    A source in a group's own NVLink domain feeds it locally; on a paced fabric
    (`topo.send_cap`) that spends the source's pace, and the group's tail may carry on."""
    if not offers:
        raise PlanningError(PlanningReason.NO_SOURCES, "no source holds the model")
    if not groups:
        return []
    chains: list[list[str]] = []
    domain_src = {topo.info(pod_node.get(o.pod, o.pod)).domain: o.pod for o in reversed(offers)}
    network: list[TargetGroup] = []
    local: list[TargetGroup] = []
    for g in groups:  # a source inside the group's own NVLink domain feeds it locally
        (local if g.domain in domain_src else network).append(g)
    info = {g.leader: topo.info(pod_node.get(g.leader, g.leader)) for g in groups}
    # The group's last member forwards to the next hop: its NIC-out limits the chain.
    tail_out = {
        g.leader: topo.info(pod_node.get(g.members[-1], g.members[-1])).nic_out
        if g.members
        else info[g.leader].nic_out
        for g in groups
    }
    pool = _Pool(network, info)
    claimed: dict[Leaf, int] = {}  # chains whose tail is on the leaf
    chain_leaf: dict[int, Leaf] = {}
    # Paced senders (send_cap) have one pace over all their links: a source feeding a
    # local group has that much less for the network, and the local chain may go on
    # over the network from its tail (after the sources, so a free source comes first).
    cap = topo.send_cap
    feeds = Counter(domain_src[g.domain] for g in local)  # local groups per source
    heap = [
        (-max(0.0, o.bandwidth - (cap or 0.0) * feeds[o.pod]), seq, o.pod, -1)  # -1: a source
        for seq, o in enumerate(offers)
    ]
    for g in local:
        chain, leaf = len(chains), info[g.leader].leaf_key
        chains.append([domain_src[g.domain], g.leader])
        if cap is not None:
            chain_leaf[chain], claimed[leaf] = leaf, claimed.get(leaf, 0) + 1
            heap.append((-min(cap, tail_out[g.leader]), len(heap), g.leader, chain))
    heapq.heapify(heap)
    seq = len(heap)
    while pool.left:
        neg_bw, _, pod, chain = heapq.heappop(heap)
        offered = -neg_bw
        here = topo.info(pod_node.get(pod, pod)).leaf_key if chain < 0 else chain_leaf[chain]
        g = pool.pick(offered, here, claimed)
        pool.take(g)
        got = min(offered, info[g.leader].nic_in)
        if chain < 0:
            chain = len(chains)
            chains.append([pod, g.leader])
            if offered - got > offered * _EPS:  # a fast source heads several chains
                heapq.heappush(heap, (-(offered - got), seq, pod, -1))
                seq += 1
        else:
            chains[chain].append(g.leader)
            claimed[chain_leaf[chain]] -= 1
        leaf = info[g.leader].leaf_key
        chain_leaf[chain] = leaf
        claimed[leaf] = claimed.get(leaf, 0) + 1
        heapq.heappush(heap, (-min(got, tail_out[g.leader]), seq, g.leader, chain))
        seq += 1
    members = {g.leader: g.members for g in groups}
    out: list[Chain] = []
    for route in chains:
        hops = [p for leader in route[1:] for p in (leader, *members[leader])]
        out.append(Chain(source=route[0], hops=hops, blocks=list(blocks)))
    return out
