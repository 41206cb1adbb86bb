"""What a re-run `cascade dev up` must change on a running cluster (pure).

`up` is a reconcile: `reconcile.observe` reads what runs into a `Current` (the agent's
cluster.json, the simulated Nodes' labels, every switch link's tbf rate, the nodes' CPU
groups), `diff` compares that with the plan the flags ask for and lists the `Change`s,
and `reconcile`/`cluster.up` carry them out. Each change says itself in one line. The
diff is taken against what runs, not only against cluster.json, so a second identical
`up` lists nothing, and one after drift (a label edited by hand, a link reshaped)
repairs it and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TypeAlias

from cascade_dev.cpuquota import LABEL_NODE_CPU, PERIOD_US, format_cores
from cascade_dev.nodeagent.nodes import NodeSpec, node_labels
from cascade_dev.topology import MODE_NETNS, ClusterPlan, NodePlan

SIMULATED_PREFIX = "cascade-node-"


@dataclass(frozen=True)
class Current:
    """The running cluster as `up` finds it."""

    plan: ClusterPlan | None = None  # cluster.json: what the node agent serves
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # simulated Nodes
    links: frozenset[str] = frozenset()  # switch links in the root namespace
    rates: Mapping[str, int] = field(default_factory=dict)  # link -> root tbf rate, Mbit/s
    # node -> cores its CPU group is held to (None: a group without limit); a node
    # without a group is absent. None: no usable cpu controller, quotas not compared.
    cpu: Mapping[str, float | None] | None = field(default_factory=dict)


@dataclass(frozen=True)
class NodeAdded:
    name: str
    leaf: str
    ip: str

    def line(self) -> str:
        return f"+ node {self.name} ({self.leaf}, {self.ip})"


@dataclass(frozen=True)
class NodeRemoved:
    name: str
    served: bool  # the running agent serves it: its pods can end gracefully

    def line(self) -> str:
        return f"- node {self.name} (pods drained, Node deleted, links removed)"


@dataclass(frozen=True)
class LeafAdded:
    name: str
    spine_mbit: int

    def line(self) -> str:
        return f"+ {self.name} (spine link {self.spine_mbit} Mbit/s)"


@dataclass(frozen=True)
class LeafRemoved:
    name: str

    def line(self) -> str:
        return f"- {self.name}"


@dataclass(frozen=True)
class Reshaped:
    """One node's NIC or one leaf's spine link: (direction, link, old, new) per end."""

    subject: str  # "cascade-node-0 NIC", "leaf-0 spine link"
    ends: tuple[tuple[str, str, int | None, int], ...]

    def line(self) -> str:
        olds, news = {e[2] for e in self.ends}, {e[3] for e in self.ends}
        if len(self.ends) > 1 and len(olds) == 1 and len(news) == 1:  # both directions
            return f"reshape {self.subject}: {_mbit(olds.pop())} -> {news.pop()} Mbit/s"
        parts = [f"{d} {_mbit(old)} -> {new}" for d, _, old, new in self.ends]
        return f"reshape {self.subject}: {', '.join(parts)} Mbit/s"


@dataclass(frozen=True)
class Relabeled:
    node: str
    labels: tuple[tuple[str, str | None, str | None], ...]  # key, old, new (None: absent)

    def patch(self) -> dict[str, object]:
        """Merge patch setting (or, for None, removing) the changed labels."""
        return {"metadata": {"labels": {k: new for k, _, new in self.labels}}}

    def line(self) -> str:
        parts = [f"{k} {_label(old)} -> {_label(new)}" for k, old, new in self.labels]
        return f"relabel {self.node}: {', '.join(parts)}"


@dataclass(frozen=True)
class CpuQuota:
    node: str
    old: float | None
    new: float | None

    def line(self) -> str:
        return f"cpu quota {self.node}: {_cores(self.old)} -> {_cores(self.new)}"


@dataclass(frozen=True)
class StorageRate:
    old: int | None
    new: int | None

    def line(self) -> str:
        old, new = (f"{r} Mbit/s" if r else "unlimited" for r in (self.old, self.new))
        return f"storage read rate: {old} -> {new} (pods started from now on)"


@dataclass(frozen=True)
class AgentRestarted:
    def line(self) -> str:
        return "node agent restarted on the new cluster.json"


Change: TypeAlias = (
    NodeAdded
    | NodeRemoved
    | LeafAdded
    | LeafRemoved
    | Reshaped
    | Relabeled
    | CpuQuota
    | StorageRate
    | AgentRestarted
)


def _mbit(rate: int | None) -> str:
    return "unshaped" if rate is None else str(rate)


def _label(value: str | None) -> str:
    return "(none)" if value is None else value


def _cores(cores: float | None) -> str:
    return "none" if cores is None else f"{format_cores(cores)} core(s)"


def same_cores(a: float | None, b: float | None) -> bool:
    """Equal as the kernel holds them: whole microseconds of quota per period."""
    if a is None or b is None:
        return a is b
    return round(a * PERIOD_US) == round(b * PERIOD_US)


def wanted_labels(node: NodePlan) -> dict[str, str]:
    """The labels the node agent gives this node (the same builder it uses)."""
    return node_labels(NodeSpec.from_json(asdict(node)))


def diff(cur: Current, want: ClusterPlan) -> list[Change]:
    """Everything that differs, removals first; empty when the cluster matches."""
    old_nodes = {n.name for n in cur.plan.nodes} if cur.plan else set()
    api_nodes = {n for n in cur.labels if n.startswith(SIMULATED_PREFIX)}
    present = old_nodes | api_nodes
    wanted = {n.name: n for n in want.nodes}
    changes: list[Change] = [
        NodeRemoved(name, served=name in old_nodes)
        for name in sorted(present - set(wanted), key=_index)
    ]
    changes += [NodeAdded(n.name, n.leaf, n.ip) for n in want.nodes if n.name not in present]
    if want.mode == MODE_NETNS:
        changes += _fabric(cur, want, present)
    for n in want.nodes:
        if n.name in cur.labels:
            changes += _relabel(n, cur.labels[n.name])
    if cur.cpu is not None:
        for n in want.nodes:
            have = cur.cpu.get(n.name)
            if not same_cores(have, n.cpu):
                changes.append(CpuQuota(n.name, have, n.cpu))
    if cur.plan is not None:
        if cur.plan.storage_mbit != want.storage_mbit:
            changes.append(StorageRate(cur.plan.storage_mbit, want.storage_mbit))
        if cur.plan.to_json() != want.to_json():
            changes.append(AgentRestarted())
    return changes


def _index(name: str) -> tuple[int, str]:
    tail = name.removeprefix(SIMULATED_PREFIX)
    return (int(tail), name) if tail.isdigit() else (1 << 30, name)


def _fabric(cur: Current, want: ClusterPlan, present: set[str]) -> list[Change]:
    """Leaves that come or go, and the shaped links of what stays whose rate differs."""
    old_leaves = {lf.name for lf in cur.plan.leaves} if cur.plan else set()
    have_leaves = old_leaves | {f"leaf-{b.removeprefix('cxleaf')}" for b in _leaf_bridges(cur)}
    wanted = {lf.name for lf in want.leaves}
    out: list[Change] = [LeafRemoved(name) for name in sorted(have_leaves - wanted)]
    for lf in want.leaves:
        if lf.name not in have_leaves:
            out.append(LeafAdded(lf.name, lf.spine_mbit))
            continue
        ends = (("up", lf.up_veth, lf.spine_mbit), ("down", lf.down_veth, lf.spine_mbit))
        out += _reshape(cur, f"{lf.name} spine link", ends)
    for n in want.nodes:
        if n.name in present:
            ends = (("out", n.up_veth, n.nic_out_mbit), ("in", n.down_veth, n.nic_in_mbit))
            out += _reshape(cur, f"{n.name} NIC", ends)
    return out


def _leaf_bridges(cur: Current) -> list[str]:
    return [name for name in cur.links if name.startswith("cxleaf")]


def _reshape(cur: Current, subject: str, ends: tuple[tuple[str, str, int], ...]) -> list[Change]:
    have = {link: cur.rates.get(link) for _, link, _ in ends}
    off = tuple((d, link, have[link], mbit) for d, link, mbit in ends if have[link] != mbit)
    return [Reshaped(subject, off)] if off else []


def _relabel(node: NodePlan, have: Mapping[str, str]) -> list[Change]:
    want: dict[str, str | None] = {LABEL_NODE_CPU: None, **wanted_labels(node)}
    off = tuple((k, have.get(k), v) for k, v in sorted(want.items()) if have.get(k) != v)
    return [Relabeled(node.name, off)] if off else []
