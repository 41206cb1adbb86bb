"""The parameter pool: who holds a deployment's weights, who may send them, and where
the host copies live.

BlitzScale's point is that O(1) host caching is enough when weights move over the
compute network: serving instances (GPU tier) send to new ones, and a few host copies
(`spec.hostCopies`, default 1) keep the model reachable when no instance holds it. This
module decides, from a snapshot of the workers alone:

- the model digest the pool is about (the one given, else the one most holders hold);
- the sources a plan may use now, preferred first (idle holders, then serving ones);
- which holders keep the host copies: existing ones stay (stability), a lost holder is
  replaced, new copies go to the leaf and then the node with the fewest copies, and a
  copy crowding a leaf moves to an empty leaf when a holder there can take it;
- which pod loads the checkpoint from storage when no copy exists at all.

Designations are pod annotations (observed.HOST_COPY_ANNOTATION), so a restarted
operator rebuilds the pool from the API: `decide_pool` has no memory. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cascade_api.scaleplan import Source, SourceTier
from cascade_operator.events import EventNote
from cascade_operator.weights.workers import WorkerView
from cascade_planner import Topology
from cascade_protocol.status import WorkerPhase

# HostCopyChange.reason values (also event reasons).
HOLDER_LOST, PLACED, REBALANCED, SURPLUS, NOT_HOLDING = (
    "HostCopyHolderLost",
    "HostCopyPlaced",
    "HostCopyRebalanced",
    "HostCopySurplus",
    "HostCopyNotHeld",
)


@dataclass(frozen=True)
class PoolInput:
    workers: Sequence[WorkerView]
    host_copies: int  # spec.hostCopies
    topo: Topology  # for the leaf of each node
    model_digest: str | None = None  # the served model; None: what most holders hold


@dataclass(frozen=True)
class HostCopyChange:
    """Set (`keep`) or clear the host-copy annotation of one pod."""

    pod: str
    node: str | None
    keep: bool
    reason: str


@dataclass(frozen=True)
class PoolDecision:
    model_digest: str | None
    # Pods a plan may send from now (hold everything, run no job), preferred first.
    sources: list[Source] = field(default_factory=list)
    holders: list[str] = field(default_factory=list)  # every pod with the whole model
    host_copies: list[str] = field(default_factory=list)  # after `changes`
    changes: list[HostCopyChange] = field(default_factory=list)
    # Pod that should pack the checkpoint (POST /v1/control/load): no copy exists.
    load_from_storage: str | None = None
    shortfall: int = 0  # host copies wanted that no holder can take yet
    message: str = ""

    def protected(self) -> set[str]:
        """Pods scale-down should spare: losing them loses a host copy."""
        return set(self.host_copies)


def served_digest(workers: Sequence[WorkerView], wanted: str | None) -> str | None:
    if wanted is not None:
        return wanted
    counts = Counter(w.model_digest for w in workers if w.has_model and w.model_digest)
    if not counts:
        return None
    return min(counts, key=lambda d: (-counts[d], d))


def decide_pool(inp: PoolInput) -> PoolDecision:
    digest = served_digest(inp.workers, inp.model_digest)
    holders = sorted((w for w in inp.workers if w.holds(digest)), key=lambda w: w.name)
    changes = [
        HostCopyChange(w.name, w.node, False, NOT_HOLDING)
        for w in inp.workers
        if w.host_copy and w.alive and not w.holds(digest)
    ]
    lost = sum(1 for w in inp.workers if w.host_copy and not w.holds(digest))
    kept, placed, moved = _place(holders, max(inp.host_copies, 0), inp.topo)
    for w in holders:
        if w.host_copy and w.name not in kept:
            reason = REBALANCED if w.name in moved else SURPLUS
            changes.append(HostCopyChange(w.name, w.node, False, reason))
    for name, reason in placed.items():
        if reason == PLACED and lost:
            reason = HOLDER_LOST
        node = next(w.node for w in holders if w.name == name)
        changes.append(HostCopyChange(name, node, True, reason))
    copies = sorted(kept)
    sources = _sources(holders, set(copies))
    loader = None
    if not holders and not any(w.alive and w.phase == WorkerPhase.LOADING for w in inp.workers):
        loader = _loader(inp.workers)
    shortfall = max(inp.host_copies, 0) - len(copies)
    message = (
        f"{len(holders)} holder(s), {len(sources)} source(s) ready, "
        f"{len(copies)}/{inp.host_copies} host copies"
        + (f" on {', '.join(copies)}" if copies else "")
        + (f"; {loader} loads from storage" if loader else "")
    )
    return PoolDecision(
        digest, sources, [w.name for w in holders], copies, changes, loader, shortfall, message
    )


def _place(
    holders: list[WorkerView], want: int, topo: Topology
) -> tuple[set[str], dict[str, str], set[str]]:
    """(pods that keep a copy, newly designated pod -> reason, pods that moved theirs)."""

    def leaf(w: WorkerView) -> object:
        return topo.info(w.node).leaf_key if w.node else ("", f"unplaced:{w.name}")

    leaves: Counter[object] = Counter()
    nodes: Counter[str | None] = Counter()

    def take(w: WorkerView, delta: int) -> None:
        leaves[leaf(w)] += delta
        nodes[w.node] += delta

    def crowding(w: WorkerView) -> tuple[int, int]:
        return (leaves[leaf(w)], nodes[w.node])

    kept: list[WorkerView] = []
    placed: dict[str, str] = {}
    moved: set[str] = set()
    # Existing copies stay, the least crowded first, until `want` are kept.
    existing = [w for w in holders if w.host_copy]
    free = [w for w in holders if not w.host_copy]
    for pool, reason in ((existing, ""), (free, PLACED)):
        while pool and len(kept) < want:
            best = min(pool, key=lambda w: (*crowding(w), w.serving, w.name))
            pool.remove(best)
            kept.append(best)
            take(best, 1)
            if reason:
                placed[best.name] = reason
    # A copy sharing its leaf moves to a leaf that has none, when a holder there can take it.
    while True:
        crowded = [w for w in kept if leaves[leaf(w)] > 1]
        empty = [w for w in free if leaves[leaf(w)] == 0]
        if not crowded or not empty:
            break
        out = max(crowded, key=lambda w: (*crowding(w), w.name))
        into = min(empty, key=lambda w: (nodes[w.node], w.serving, w.name))
        kept.remove(out)
        free.remove(into)
        kept.append(into)
        take(out, -1)
        take(into, 1)
        if placed.pop(out.name, None) is None:
            moved.add(out.name)
        placed[into.name] = REBALANCED
    return {w.name for w in kept}, placed, moved


def _sources(holders: list[WorkerView], copies: set[str]) -> list[Source]:
    """Ready holders, preferred first: host copies and idle holders (sending does not
    compete with serving traffic), then serving instances."""
    ready = [w for w in holders if w.complete]
    ready.sort(key=lambda w: (w.serving and w.name not in copies, w.name not in copies, w.name))
    return [
        Source(
            pod=w.name,
            tier=SourceTier.HOST if w.name in copies or not w.serving else SourceTier.GPU,
        )
        for w in ready
    ]


def _loader(workers: Sequence[WorkerView]) -> str | None:
    """The pod to load the checkpoint: a reachable idle worker, lowest name first."""
    idle = [w for w in workers if w.alive and w.phase is not None and not w.busy]
    idle.sort(key=lambda w: (not w.needs_weights, w.name))
    return idle[0].name if idle else None


def pool_events(decision: PoolDecision) -> list[EventNote]:
    """One event per host-copy change, and a warning while copies are short."""
    out = [
        EventNote("Normal", ch.reason, f"{'keep' if ch.keep else 'drop'} host copy on {ch.pod}")
        for ch in decision.changes
    ]
    if decision.shortfall > 0:
        message = f"{decision.shortfall} host copies short: {decision.message}"
        out.append(EventNote("Warning", "HostCopiesShort", message))
    return out
