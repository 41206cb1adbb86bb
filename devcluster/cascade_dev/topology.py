"""Pure planning of the simulated cluster: nodes, leaves, names and addresses.

`cascade dev up` turns its flags into a `ClusterPlan`, writes it as `cluster.json`, and the
fabric and the node agent read it back. Nothing here touches the system, so leaf
assignment, address allocation and interface-name lengths are unit-tested directly.

Shape: a two-tier leaf-spine network. Node i sits on leaf i // nodes_per_leaf; leaves
alternate between zone-a and zone-b; each node is one NVLink clique of `gpus` GPUs. The
host (API server) is 198.18.255.254 on the spine; node i's InternalIP is 198.18.i.1 (a /32
on the spine bridge, so it is a local address the node agent can bind) and its pods get
198.18.i.2 .. 198.18.i.254. Without root the same layout maps onto 127.1.i.x on loopback.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from cascade_api import constants as c
from cascade_dev.cpuquota import LABEL_NODE_CPU, check_cores, format_cores

MODE_NETNS = "netns"
MODE_LOOPBACK = "loopback"
NETNS_HOST_IP = "198.18.255.254"
LOOPBACK_HOST_IP = "127.0.0.1"
NETNS_PREFIX = "198.18"
LOOPBACK_PREFIX = "127.1"
PREFIX_LEN = 16
MAX_NODES = 254  # third octet 0..253; 255 holds the host address
FIRST_POD_HOST = 2  # .1 is the node's own address
LAST_POD_HOST = 254
IFNAMSIZ = 15  # Linux interface names: at most 15 characters
SPINE_BRIDGE = "cxspine"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
UID_CHARS = 12
# Model storage read rate per pod, Mbit/s (`--storage-mbit`; 0 turns it off). Real
# clusters read model storage (S3, NFS, a PVC) at a few Gbit/s while GPU NICs run
# 100-400 Gbit/s: storage is some 10-50x slower than a NIC. 100 keeps that ratio
# against the default 1000 Mbit/s NIC, so loading from storage costs what it should
# relative to a transfer from a peer, instead of running at page-cache speed.
DEFAULT_STORAGE_MBIT = 100
# Fabric MTU: GPU clusters' data fabrics run jumbo frames (EFA 9001, RoCE 4096 and up),
# so TCP/IP headers take 0.7 % of a link, not the 4.2 % of MTU 1500. cluster.json files
# written before the option had 1500.
DEFAULT_MTU = 9000
LEGACY_MTU = 1500
MTU_RANGE = (1280, 9216)


def node_name(index: int) -> str:
    return f"cascade-node-{index}"


def leaf_of(index: int, nodes_per_leaf: int) -> int:
    return index // nodes_per_leaf


def zone_of_leaf(leaf: int) -> str:
    return "zone-a" if leaf % 2 == 0 else "zone-b"


def node_ip(mode: str, index: int) -> str:
    return f"{_prefix(mode)}.{index}.1"


def pod_ip(mode: str, index: int, host: int) -> str:
    return f"{_prefix(mode)}.{index}.{host}"


def _prefix(mode: str) -> str:
    return NETNS_PREFIX if mode == MODE_NETNS else LOOPBACK_PREFIX


def allocate_pod_ip(mode: str, index: int, used: Iterable[str], last: str | None = None) -> str:
    """The next free pod address on node `index` after `last` (the node's previous
    allocation), wrapping around, given every address already handed out.

    Round robin, as CNI's host-local IPAM does, and for its reason: an address freed a
    moment ago is still in its neighbours' ARP caches under the old pod's MAC, and a new
    pod given it at once was unreachable for ~50 s (measured on this fabric)."""
    taken = set(used)
    hosts = list(range(FIRST_POD_HOST, LAST_POD_HOST + 1))
    prev = int(last.rsplit(".", 1)[1]) if last else FIRST_POD_HOST - 1
    start = next((i for i, h in enumerate(hosts) if h > prev), 0)
    for host in hosts[start:] + hosts[:start]:
        ip = pod_ip(mode, index, host)
        if ip not in taken:
            return ip
    raise RuntimeError(f"node {index}: all {len(hosts)} pod IPs in use")


def uid_key(pod_uid: str) -> str:
    return pod_uid.replace("-", "").lower()[:UID_CHARS]


POD_NETNS_PREFIX = "cxp-"
POD_VETH_PREFIX = "cxv"


def pod_netns(pod_uid: str) -> str:
    return POD_NETNS_PREFIX + uid_key(pod_uid)


def pod_host_veth(pod_uid: str) -> str:
    """Root-namespace end of the pod's veth (on the node bridge)."""
    return POD_VETH_PREFIX + uid_key(pod_uid)


def pod_temp_veth(pod_uid: str) -> str:
    """Pod end before it moves into the pod namespace and becomes eth0."""
    return f"cxq{uid_key(pod_uid)}"


def tbf_args(mbit: int) -> list[str]:
    """tc tbf parameters for one direction: burst covers 2 ms (at least two 64 KiB GSO
    super-packets, which tbf must pass whole), queue bounded by 20 ms of latency."""
    burst = max(mbit * 1_000_000 // 8 // 500, 2 * 65536 + 3000)
    return ["rate", f"{mbit}mbit", "burst", str(burst), "latency", "20ms"]


def parse_tbf_rates(tc_json: str) -> dict[str, int]:
    """Root tbf rate (Mbit/s) per device from `tc -j qdisc show` (rates in bytes/s)."""
    rates = {}
    for q in json.loads(tc_json or "[]"):
        rate = (q.get("options") or {}).get("rate")
        if q.get("kind") == "tbf" and q.get("root") and q.get("dev") and rate is not None:
            rates[str(q["dev"])] = round(int(rate) * 8 / 1_000_000)
    return rates


@dataclass(frozen=True)
class LeafPlan:
    name: str  # leaf-<L>
    index: int
    zone: str
    bridge: str  # cxleaf<L>
    up_veth: str  # leaf end of the leaf<->spine pair; egress = leaf -> spine
    down_veth: str  # spine end; egress = spine -> leaf
    spine_mbit: int


@dataclass(frozen=True)
class NodePlan:
    name: str
    index: int
    zone: str
    leaf: str
    leaf_index: int
    nvlink_clique: str
    gpus: int
    nic_in_mbit: int
    nic_out_mbit: int
    ip: str  # the Node's InternalIP
    bridge: str  # cxn<i>: pods of this node attach here, unshaped
    up_veth: str  # node end of the node<->leaf pair; egress shaped at nic_out_mbit
    down_veth: str  # leaf end; egress shaped at nic_in_mbit
    labels: dict[str, str] = field(default_factory=dict)
    cpu: float | None = None  # cores of CPU quota for the node's pods; None: unlimited


@dataclass(frozen=True)
class ClusterPlan:
    mode: str
    host_ip: str
    spine_mbit: int
    nodes: tuple[NodePlan, ...]
    leaves: tuple[LeafPlan, ...]
    spine_bridge: str = SPINE_BRIDGE
    prefix_len: int = PREFIX_LEN
    # Every pod reads model storage at most this fast ($CASCADE_STORAGE_MBIT, set by the
    # node agent); None = unlimited, also for cluster.json files written before it.
    storage_mbit: int | None = None
    mtu: int = DEFAULT_MTU  # every fabric link's and pod NIC's

    def node(self, name: str) -> NodePlan:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"unknown node {name!r}; cluster has {[n.name for n in self.nodes]}")

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterPlan:
        return cls(
            mode=data["mode"],
            host_ip=data["host_ip"],
            spine_mbit=data["spine_mbit"],
            nodes=tuple(NodePlan(**n) for n in data["nodes"]),
            leaves=tuple(LeafPlan(**lf) for lf in data["leaves"]),
            spine_bridge=data.get("spine_bridge", SPINE_BRIDGE),
            prefix_len=data.get("prefix_len", PREFIX_LEN),
            storage_mbit=data.get("storage_mbit"),
            mtu=data.get("mtu", LEGACY_MTU),
        )


def plan_cluster(
    nodes: int,
    *,
    mode: str = MODE_NETNS,
    gpus_per_node: int = 8,
    nic_mbit: int = 1000,
    spine_mbit: int | None = None,
    nodes_per_leaf: int = 4,
    node_cpu: float | None = None,
    storage_mbit: int | None = None,
    mtu: int = DEFAULT_MTU,
) -> ClusterPlan:
    """The whole cluster from `cascade dev up` flags. Spine links default to one NIC's rate,
    so a full leaf is oversubscribed nodes_per_leaf:1 toward the spine. `node_cpu` gives
    every node a CPU quota (cpuquota.py) and the label that tells readers about it;
    `storage_mbit` caps every pod's model storage reads (None: unlimited); `mtu` is every
    fabric link's."""
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"--nodes must be 1..{MAX_NODES}, got {nodes}")
    if nodes_per_leaf < 1 or gpus_per_node < 0 or nic_mbit < 1:
        raise ValueError("--nodes-per-leaf and --nic-mbit must be >= 1, --gpus-per-node >= 0")
    if mode not in (MODE_NETNS, MODE_LOOPBACK):
        raise ValueError(f"unknown fabric mode {mode!r}")
    spine = spine_mbit if spine_mbit is not None else nic_mbit
    if spine < 1:
        raise ValueError("--spine-mbit must be >= 1")
    if node_cpu is not None:
        check_cores(node_cpu)
    if storage_mbit is not None and storage_mbit < 1:
        raise ValueError("--storage-mbit must be >= 1 (0 on the command line: unlimited)")
    if not MTU_RANGE[0] <= mtu <= MTU_RANGE[1]:
        raise ValueError(f"--mtu must be {MTU_RANGE[0]}..{MTU_RANGE[1]}, got {mtu}")
    leaf_count = leaf_of(nodes - 1, nodes_per_leaf) + 1
    leaves = tuple(
        LeafPlan(
            name=f"leaf-{li}",
            index=li,
            zone=zone_of_leaf(li),
            bridge=f"cxleaf{li}",
            up_veth=f"cxlu{li}",
            down_veth=f"cxld{li}",
            spine_mbit=spine,
        )
        for li in range(leaf_count)
    )
    plans = []
    for i in range(nodes):
        li = leaf_of(i, nodes_per_leaf)
        name = node_name(i)
        clique = f"{name}-nvl"
        labels = {
            c.LABEL_ZONE: zone_of_leaf(li),
            c.LABEL_LEAF: f"leaf-{li}",
            c.LABEL_NVLINK_CLIQUE: clique,
            c.LABEL_GPU_PRODUCT: GPU_PRODUCT,
            c.LABEL_NIC_IN_MBIT: str(nic_mbit),
            c.LABEL_NIC_OUT_MBIT: str(nic_mbit),
            c.LABEL_NIC_MTU: str(mtu),
        }
        if node_cpu is not None:
            labels[LABEL_NODE_CPU] = format_cores(node_cpu)
        plans.append(
            NodePlan(
                name=name,
                index=i,
                zone=zone_of_leaf(li),
                leaf=f"leaf-{li}",
                leaf_index=li,
                nvlink_clique=clique,
                gpus=gpus_per_node,
                nic_in_mbit=nic_mbit,
                nic_out_mbit=nic_mbit,
                ip=node_ip(mode, i),
                bridge=f"cxn{i}",
                up_veth=f"cxnu{i}",
                down_veth=f"cxnd{i}",
                labels=labels,
                cpu=node_cpu,
            )
        )
    host = NETNS_HOST_IP if mode == MODE_NETNS else LOOPBACK_HOST_IP
    return ClusterPlan(
        mode=mode,
        host_ip=host,
        spine_mbit=spine,
        nodes=tuple(plans),
        leaves=leaves,
        storage_mbit=storage_mbit,
        mtu=mtu,
    )


def link_names(plan: ClusterPlan) -> list[str]:
    """Every switch-level interface the plan creates in the root namespace."""
    names = [plan.spine_bridge]
    for lf in plan.leaves:
        names += [lf.bridge, lf.up_veth, lf.down_veth]
    for n in plan.nodes:
        names += [n.bridge, n.up_veth, n.down_veth]
    return names
