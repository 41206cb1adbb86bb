"""Predict a ScalePlanSpec on a topology: when each target holds each block.

The flow model (flow.py) gives block arrival times per target; from them follow each
target's completion, the plan's predicted completion (the last target), the execution
pipelines that can form on the way (pipelines.py) and the per-target predictions the
spec carries. Chains: each chain is a sub-group for pipeline formation (with shifted
orders, different chains hold different layers early). Binomial: the schedule's
sub-groups.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from cascade_api.scaleplan import (
    ExecutionPipeline,
    PlanStrategy,
    ScalePlanSpec,
    SourceTier,
    TargetPrediction,
)
from cascade_planner.binomial import SubGroup
from cascade_planner.binomial_time import arrivals as step_arrivals
from cascade_planner.binomial_time import step_ends
from cascade_planner.flow import predict_chains, predict_steps, shown
from cascade_planner.pipelines import form_pipelines
from cascade_planner.topology import Link, Topology


@dataclass(frozen=True)
class Prediction:
    completion: float  # seconds until every target holds every block
    arrivals: dict[str, list[float]]  # target -> seconds until it holds block position i
    pipelines: list[ExecutionPipeline]
    targets: list[TargetPrediction]


class _Paths:
    """Memoized node-to-node paths of one prediction."""

    def __init__(self, topo: Topology, pod_node: Mapping[str, str]) -> None:
        self.topo, self.pod_node = topo, pod_node
        self.cache: dict[tuple[str, str], tuple[Link, ...]] = {}

    def node(self, pod: str) -> str:
        return self.pod_node.get(pod, pod)

    def __call__(self, a: str, b: str) -> tuple[Link, ...]:
        key = (a, b)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = self.topo.path(a, b)
        return found


def predict(
    spec: ScalePlanSpec,
    topo: Topology,
    pod_node: Mapping[str, str],
    *,
    chunk_bytes: int,
    hop_latency_s: float = 0.0,
    groups: Sequence[Sequence[str]] | None = None,
    source_stages: bool = False,
    cooperative: bool = False,
    pipeline_lead_s: float = 0.0,
    stageless: Collection[str] = (),
    subgroups: Sequence[SubGroup] | None = None,
) -> Prediction:
    """Flow-model prediction of `spec` (blocks numbered 0..b-1 in layer order);
    `source_stages`: its sources may join execution pipelines (pipelines.py), each
    pipeline serving at least `pipeline_lead_s` before a member could serve alone;
    `stageless`: targets that never do (host copies run no engine); `subgroups`: the
    sub-groups a binomial spec's schedule was made from, to time it from their index
    schedules (binomial_time.py: the same numbers, without walking its transfers)."""
    blocks = sorted(spec.blocks, key=lambda b: b.index)
    pos = {b.index: i for i, b in enumerate(blocks)}
    paths = _Paths(topo, pod_node)
    arrivals: dict[str, list[float]] = {t: [float("inf")] * len(blocks) for t in spec.targets}
    nvlink: set[str] = set()
    if PlanStrategy(spec.strategy) == PlanStrategy.CHAIN:
        orders = [[pos[i] for i in (c.blocks or [b.index for b in blocks])] for c in spec.chains]
        routes = [[c.source, *c.hops] for c in spec.chains]
        fill = min(chunk_bytes, max((b.bytes for b in blocks), default=0))
        times = predict_chains(
            [[paths.node(p) for p in r] for r in routes],
            [[blocks[p].bytes for p in order] for order in orders],
            paths,
            topo.capacity,
            fill_bytes=fill,
            hop_latency_s=hop_latency_s,
        )
        in_order = list(range(len(blocks)))
        for c, route in enumerate(routes):
            for j, pod in enumerate(route[1:]):
                got = times.arrivals[c][j]
                if orders[c] == in_order:
                    arrivals[pod] = got
                else:
                    for p, t in zip(orders[c], got, strict=True):
                        arrivals[pod][p] = t
                if paths(paths.node(route[j]), paths.node(pod))[0][1][0] == "nvl":
                    nvlink.add(pod)  # one NVLink domain: Topology.path stays off the NICs
        default_groups: list[list[str]] = [list(c.hops) for c in spec.chains]
    elif subgroups is not None:
        size_of = {b.index: b.bytes for b in blocks}
        ends = step_ends(subgroups, size_of, topo, pod_node, len(blocks), hop_latency_s)
        arrivals.update(step_arrivals(subgroups, len(blocks), ends, pos))
        origin = {t: g.source for g in subgroups for t in g.targets}
        default_groups = _by_source([g.source for g in subgroups], spec.targets, origin)
    else:
        size = [b.bytes for b in blocks]
        node = paths.node
        steps = [
            [(node(t.sender), node(t.receiver), size[pos[t.block]]) for t in s.transfers]
            for s in spec.schedule
        ]
        ends = predict_steps(steps, paths, topo.capacity, hop_latency_s=hop_latency_s)
        for s, step in enumerate(spec.schedule):
            for tr in step.transfers:
                row = arrivals.get(tr.receiver)
                if row is not None:
                    row[pos[tr.block]] = min(row[pos[tr.block]], ends[s])
        default_groups = [] if groups is not None else _binomial_groups(spec)
    # A host copy runs no engine: only instances (tier gpu) may close a pipeline.
    joining = [s.pod for s in spec.sources if s.tier == SourceTier.GPU] if source_stages else []
    chosen = groups if groups is not None else default_groups
    members = [[p for p in g if p not in stageless] for g in chosen]
    pipelines = form_pipelines(members, arrivals, blocks, joining, cooperative, pipeline_lead_s)
    joins = {
        st.pod: e.ready_seconds for e in pipelines for st in e.stages if e.ready_seconds is not None
    }
    targets = [
        TargetPrediction(
            pod=t,
            complete_seconds=shown(max(arrivals[t], default=0.0)),
            pipeline_seconds=joins.get(t),
            nvlink=t in nvlink,
        )
        for t in spec.targets
    ]
    completion = max((p.complete_seconds for p in targets), default=0.0)
    return Prediction(completion, arrivals, pipelines, targets)


def _binomial_groups(spec: ScalePlanSpec) -> list[list[str]]:
    """Sub-groups of a binomial schedule: each target under the source it descends from."""
    sources = [o.source for o in spec.block_orders]
    origin: dict[str, str] = {s: s for s in sources}
    for step in spec.schedule:
        for tr in step.transfers:
            if tr.receiver not in origin and tr.sender in origin:
                origin[tr.receiver] = origin[tr.sender]
    return _by_source(sources, spec.targets, origin)


def _by_source(
    sources: Sequence[str], targets: Sequence[str], origin: Mapping[str, str]
) -> list[list[str]]:
    groups: dict[str, list[str]] = {s: [] for s in sources}
    for t in targets:
        groups.setdefault(origin.get(t, ""), []).append(t)
    return [g for g in groups.values() if g]
