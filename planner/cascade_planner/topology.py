"""The fabric the planner plans over, built from Kubernetes Node objects.

Labels (api/cascade_api/constants.py; defaults from the README's "Node topology labels"):
zone `topology.kubernetes.io/zone` (one zone), NVLink domain `nvidia.com/gpu.clique`
(the node alone), GPU `nvidia.com/gpu.product` (unknown), leaf switch
`cascade.dev/leaf-switch` (one leaf), NIC rates `cascade.dev/nic-in-mbit` /
`cascade.dev/nic-out-mbit` (100000). A label that does not parse as a positive number
falls back to the default and is listed in `Topology.warnings`.

The model is a networkx DiGraph whose edges carry `capacity` in bytes/s:
  node -> leaf (NIC out), leaf -> node (NIC in): every flow from or to a node shares them;
  leaf -> zone and zone -> leaf (the leaf's spine uplink/downlink): flows between leaves;
  zone -> core and core -> zone (zone uplinks): flows between zones; unlimited unless
  `zone_mbit` is set (then, and only then, paths include them);
  node <-> nvl:<domain> at `nvlink_mbit`: transfers inside one NVLink domain (pods on one
  node count as one domain) never touch the network.
Leaf uplink default: the sum of the leaf's NIC rates (non-blocking leaf, what
`cascade bench multicast` builds) divided by `oversubscription`; `spine_mbit` overrides
it with one fixed rate per leaf and direction. Leaves are keyed by (zone, leaf label).

Planning touches only the sources' and targets' nodes: `path` is computed from their
labels in O(1) (the fabric is a tree), and `capacity` reads a dict that mirrors the
graph's edge attributes (the graph itself is built on first use), so planning never
walks all n nodes. Nor does pacing (`send_capped`: a view that caps node out-links as
they are read), and node events need no rebuild (topology_index.TopologyIndex).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from cascade_api import constants as c

DEFAULT_NIC_MBIT = 100_000
DEFAULT_ZONE = ""
DEFAULT_LEAF = ""
DEFAULT_NVLINK_MBIT = 1_600_000  # 1.6 Tbps, BlitzScale's testbed NVLink
BYTES_PER_MBIT = 1e6 / 8
TCP_IP_HEADERS = 52  # IPv4 20 + TCP 20 + timestamps 12, in every frame's MTU
ETHERNET_HEADER = 14  # counted on the wire (and by a tbf qdisc), outside the MTU
MIN_MTU = 576
ASSUMED_MTU = 1500  # a NIC without LABEL_NIC_MTU


def payload_share(mtu: float) -> float:
    """Payload bytes per byte on the wire, TCP/IPv4 over Ethernet at this MTU."""
    return (mtu - TCP_IP_HEADERS) / (mtu + ETHERNET_HEADER)


DEFAULT_GOODPUT = payload_share(ASSUMED_MTU)  # 1448 / 1514

Vertex = tuple[str, Any]  # (kind, name): node, leaf, zone, core or nvl
Link = tuple[Vertex, Vertex]


@dataclass(frozen=True)
class FabricParams:
    """Fabric facts that are not on the nodes; rates in Mbit/s, each direction."""

    spine_mbit: float | None = None  # per-leaf uplink; None: sum of its NICs / oversub
    oversubscription: float = 1.0
    zone_mbit: float | None = None  # per-zone uplink to the core; None: unlimited
    nvlink_mbit: float = DEFAULT_NVLINK_MBIT
    default_nic_mbit: float = DEFAULT_NIC_MBIT
    # Share of a network link's rate that carries payload: TCP/IPv4 over Ethernet at MTU
    # 1500 moves 1448 payload bytes per 1514-byte frame (0.956); RoCE at MTU 4096 is
    # about 0.98. Labels give line rates; the flow model needs payload rates. A node's
    # LABEL_NIC_MTU overrides it for that node's NIC.
    goodput: float = DEFAULT_GOODPUT

    @property
    def per_mbit(self) -> float:
        """Payload bytes/s per Mbit/s of network line rate."""
        return BYTES_PER_MBIT * self.goodput


@dataclass(frozen=True)
class NodeInfo:
    name: str
    zone: str
    leaf: str
    domain: str  # NVLink domain: the clique label, or the node's own name
    gpu_product: str | None
    nic_in: float  # bytes/s
    nic_out: float  # bytes/s

    @property
    def leaf_key(self) -> tuple[str, str]:
        return (self.zone, self.leaf)


def _positive(
    labels: Mapping[str, str], key: str, default: float, warn: list[str], node: str
) -> float:
    raw = labels.get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        warn.append(f"node {node}: {key}={raw!r} is not a positive number; using {default}")
        return default
    return value


def node_info(
    node: Mapping[str, Any], params: FabricParams, warnings: list[str] | None = None
) -> NodeInfo:
    """One Node object (a dict as the API returns it) to its topology facts."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name", ""))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    warn = warnings if warnings is not None else []
    clique = labels.get(c.LABEL_NVLINK_CLIQUE)
    nic = params.default_nic_mbit
    per_mbit = params.per_mbit
    if c.LABEL_NIC_MTU in labels:
        mtu = _positive(labels, c.LABEL_NIC_MTU, ASSUMED_MTU, warn, name)
        if mtu < MIN_MTU:
            warn.append(f"node {name}: {c.LABEL_NIC_MTU}={mtu:g} is below {MIN_MTU}; ignored")
        else:
            per_mbit = BYTES_PER_MBIT * payload_share(mtu)
    return NodeInfo(
        name=name,
        zone=labels.get(c.LABEL_ZONE, DEFAULT_ZONE),
        leaf=labels.get(c.LABEL_LEAF, DEFAULT_LEAF),
        domain=f"clique:{clique}" if clique else f"node:{name}",
        gpu_product=labels.get(c.LABEL_GPU_PRODUCT),
        nic_in=_positive(labels, c.LABEL_NIC_IN_MBIT, nic, warn, name) * per_mbit,
        nic_out=_positive(labels, c.LABEL_NIC_OUT_MBIT, nic, warn, name) * per_mbit,
    )


@dataclass
class Topology:
    """Nodes plus the capacitated fabric graph; build with `topology_from_nodes`."""

    nodes: dict[str, NodeInfo]
    params: FabricParams
    warnings: list[str] = field(default_factory=list)
    _cap: dict[Link, float] = field(default_factory=dict, repr=False)
    # Bytes/s a sender sends in all, over every link together (send_capped: the
    # workers' Pacer is one per process); None: each link is its own limit.
    send_cap: float | None = None
    # Bytes/s every link out of a node carries at most (send_capped), applied as `info`
    # and `capacity` read: `nodes` and `_cap` keep the labelled rates, so a paced view
    # shares them instead of copying 10,000 nodes for a plan that reads a few hundred.
    out_cap: float | None = None
    _paced: dict[str, NodeInfo] = field(default_factory=dict, repr=False, compare=False)

    @functools.cached_property
    def graph(self) -> nx.DiGraph:
        """The fabric as a networkx DiGraph (edge attribute `capacity`, bytes/s).

        Built on first use: planning reads the same capacities from a dict and never
        needs it, and building it costs more than planning at 10,000 nodes.
        """
        graph = nx.DiGraph()
        graph.add_edges_from((u, v, {"capacity": self.capacity((u, v))}) for u, v in self._cap)
        return graph

    def info(self, node: str) -> NodeInfo:
        """Facts for `node`; an unknown node gets every default (one leaf, one zone)."""
        found = self.nodes.get(node)
        if found is None:
            rate = self.params.default_nic_mbit * self.params.per_mbit
            return NodeInfo(node, DEFAULT_ZONE, DEFAULT_LEAF, f"node:{node}", None, rate, rate)
        if self.out_cap is None:
            return found
        paced = self._paced.get(node)
        if paced is None:
            paced = self._paced[node] = replace(found, nic_out=min(found.nic_out, self.out_cap))
        return paced

    def capacity(self, link: Link) -> float:
        """Bytes/s of one directed link (also for links of nodes not in the graph)."""
        cap = self._cap.get(link)
        if cap is not None:
            if self.out_cap is not None and link[0][0] == "node":
                return min(cap, self.out_cap)
            return cap
        (kind_a, a), (kind_b, b) = link
        p = self.params
        if kind_a == "nvl" or kind_b == "nvl":
            return p.nvlink_mbit * BYTES_PER_MBIT
        if kind_a == "node":
            return self.info(a).nic_out
        if kind_b == "node":
            return self.info(b).nic_in
        return p.default_nic_mbit * p.per_mbit  # an uplink of an unseen leaf

    def path(self, src: str, dst: str) -> tuple[Link, ...]:
        """Directed links a transfer from node `src` to node `dst` crosses."""
        a, b = self.info(src), self.info(dst)
        na, nb = ("node", src), ("node", dst)
        if a.domain == b.domain or src == dst:
            nvl = ("nvl", a.domain)
            return ((na, nvl), (nvl, nb))
        la, lb = ("leaf", a.leaf_key), ("leaf", b.leaf_key)
        if la == lb:
            return ((na, la), (la, nb))
        za, zb = ("zone", a.zone), ("zone", b.zone)
        if za == zb or self.params.zone_mbit is None:
            return ((na, la), (la, za), (zb, lb), (lb, nb))
        core = ("core", "")
        return ((na, la), (la, za), (za, core), (core, zb), (zb, lb), (lb, nb))


def topology_from_nodes(
    nodes: Iterable[Mapping[str, Any]], params: FabricParams | None = None
) -> Topology:
    """The fabric model for these Node objects (plain dicts); to keep one current under
    node events without rebuilding it, see topology_index.TopologyIndex."""
    params = params or FabricParams()
    warnings: list[str] = []
    return assemble([node_info(n, params, warnings) for n in nodes], params, warnings)


def assemble(infos: Sequence[NodeInfo], params: FabricParams, warnings: list[str]) -> Topology:
    """The Topology of these nodes: their links, their leaves' and zones' uplinks."""
    cap: dict[Link, float] = {}
    leaves: dict[tuple[str, str], list[NodeInfo]] = {}
    for n in infos:
        cap.update(node_links(n, params))
        leaves.setdefault(n.leaf_key, []).append(n)
    for key, members in leaves.items():
        out = math.fsum(n.nic_out for n in members)
        cap.update(leaf_links(key, out, math.fsum(n.nic_in for n in members), params))
    for zone in sorted({key[0] for key in leaves}):
        cap.update(zone_links(zone, params))
    return Topology(nodes={n.name: n for n in infos}, params=params, warnings=warnings, _cap=cap)


def node_links(n: NodeInfo, params: FabricParams) -> tuple[tuple[Link, float], ...]:
    """A node's links: NIC out to its leaf and in from it, NVLink to and from its domain."""
    node, leaf, dom = ("node", n.name), ("leaf", n.leaf_key), ("nvl", n.domain)
    nvl = params.nvlink_mbit * BYTES_PER_MBIT
    return (
        ((node, leaf), n.nic_out),
        ((leaf, node), n.nic_in),
        ((node, dom), nvl),
        ((dom, node), nvl),
    )


def leaf_links(
    key: tuple[str, str], nic_out: float, nic_in: float, params: FabricParams
) -> tuple[tuple[Link, float], ...]:
    """A leaf's links to its zone and back: the sums of its nodes' NIC rates (exactly
    rounded, math.fsum: the same float in any order, so a leaf updated node by node has
    the rate a rebuild gives) over `oversubscription`, or `spine_mbit`."""
    leaf, zone = ("leaf", key), ("zone", key[0])
    if params.spine_mbit is not None:
        up = down = params.spine_mbit * params.per_mbit
    else:
        up, down = nic_out / params.oversubscription, nic_in / params.oversubscription
    return ((leaf, zone), up), ((zone, leaf), down)


def zone_links(zone: str, params: FabricParams) -> tuple[tuple[Link, float], ...]:
    """A zone's uplink to the core and back (unlimited unless `zone_mbit` is set)."""
    z, core = ("zone", zone), ("core", "")
    rate = float("inf") if params.zone_mbit is None else params.zone_mbit * params.per_mbit
    return ((z, core), rate), ((core, z), rate)


def send_capped(topo: Topology, mbit: float | None) -> Topology:
    """The fabric as weight traffic sees it when every sender is paced to `mbit` (the
    workers' Pacer, spec.multicast.rateMbit): each link out of a node, NIC or NVLink,
    carries at most that, and so does a sender over all its links (`send_cap`). A view
    for one plan, made in O(1): it shares `topo`'s node and link tables, so pace a
    TopologyIndex's snapshot, not its live topology, where events may arrive meanwhile."""
    if mbit is None:
        return topo
    rate = mbit * BYTES_PER_MBIT  # the pacer paces payload bytes
    params = replace(
        topo.params, default_nic_mbit=min(topo.params.default_nic_mbit, mbit / topo.params.goodput)
    )
    out = rate if topo.out_cap is None else min(topo.out_cap, rate)
    return Topology(topo.nodes, params, list(topo.warnings), topo._cap, rate, out)
