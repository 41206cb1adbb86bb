"""`plan(request, topology) -> ScalePlanSpec`: the decision the operator calls.

Steps, each a small function: validate the request (typed `PlanningError` on bad or
insufficient input), drop sources that do not hold every block, prune sources busy
with serving traffic (blitz.prune_sources), then build the candidate plans —
`chain` (BlitzScale: NVLink groups, greedy multi-chains by bandwidth and leaf) and
`binomial` (λScale: k-way binomial pipeline with circular-shift orders) — predict each
with the flow model, and for `auto` keep the one whose last target completes first
(within 1 %, the chain plan: fewer connections, simpler recovery). The spec carries the
prediction: completion, per-target times, and the execution pipelines that can form
while blocks arrive. Pure: no clock, no I/O; the same request gives the same plan.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from cascade_api.scaleplan import Block, PlanStrategy, ScalePlanSpec, Source
from cascade_planner.blitz import SourceOffer, greedy_chains, group_by_nvlink, prune_sources
from cascade_planner.errors import PlanningError, PlanningReason
from cascade_planner.flow import shown
from cascade_planner.kway import kway_plan
from cascade_planner.orders import circular_shift_orders
from cascade_planner.predict import Prediction, predict
from cascade_planner.topology import Topology

AUTO = "auto"
TIE_MARGIN = 0.01  # auto prefers chain unless binomial is more than 1 % faster


@dataclass(frozen=True)
class PlanRequest:
    deployment: str
    model_digest: str
    blocks: Sequence[Block]  # the block table, numbered 0..b-1 in layer order
    sources: Sequence[Source]  # pods holding the whole model, preferred first
    targets: Sequence[str]
    # pod -> Node name (pod.spec.nodeName); an unknown pod is a node of its own name.
    pod_node: Mapping[str, str] = field(default_factory=dict)
    strategy: str = AUTO  # chain | binomial | auto
    k: int | None = None  # sources to use; None: every usable one (binomial: <= targets)
    # pod -> fraction of its NIC-out that serving uses (1.0 = busy); see blitz.py.
    serving_out: Mapping[str, float] = field(default_factory=dict)
    busy_threshold: float = 0.5
    shift: bool = False  # chains in circular-shift orders (binomial sub-groups always are)
    # What each source holds, when known; sources missing a block are not used.
    holdings: Mapping[str, Collection[int]] | None = None
    chunk_bytes: int = 1 << 20  # the executor's chunk: a chain hop's fill
    hop_latency_s: float = 0.0  # per hop (chain) or per step (binomial) start cost
    # Live scale-ups: sources may serve as the last stage of an execution pipeline.
    source_stages: bool = False
    cooperative: bool = False  # ... from the target's first block (BlitzScale 5.2)
    # Targets that run no engine (host copies): they receive, never join a pipeline.
    stageless: Collection[str] = ()


@dataclass(frozen=True)
class Candidate:
    spec: ScalePlanSpec
    prediction: Prediction


def plan(request: PlanRequest, topo: Topology) -> ScalePlanSpec:
    """The plan for `request` on `topo`; PlanningError (with a reason) if none can be made."""
    return plan_candidates(request, topo)[0].spec


def plan_candidates(request: PlanRequest, topo: Topology) -> list[Candidate]:
    """Every strategy the request allows, chosen one first, each with its prediction."""
    strategy = _strategy(request.strategy)
    blocks = _validate(request)
    offers, pruned = _offers(request, topo)
    k = _k(request, strategy, len(offers), pruned)
    names = [PlanStrategy.CHAIN, PlanStrategy.BINOMIAL] if strategy == AUTO else [strategy]
    found = [_build(s, request, blocks, offers, k, topo) for s in names]
    if len(found) == 2:
        chain, binomial = found
        if binomial.prediction.completion < chain.prediction.completion * (1 - TIE_MARGIN):
            found.reverse()
        loser = found[1]
        found[0].spec.reason = (
            f"auto: {found[0].spec.strategy} {found[0].prediction.completion:.4g}s vs "
            f"{loser.spec.strategy} {loser.prediction.completion:.4g}s predicted"
        )
    if pruned:
        note = f"pruned busy sources: {', '.join(pruned)}"
        for c in found:
            c.spec.reason = f"{c.spec.reason}; {note}" if c.spec.reason else note
    return found


def _strategy(raw: str) -> str:
    if raw == AUTO:
        return AUTO
    try:
        return PlanStrategy(raw)
    except ValueError:
        raise PlanningError(
            PlanningReason.INVALID_REQUEST, f"strategy {raw!r} is not chain, binomial or auto"
        ) from None


def _validate(request: PlanRequest) -> list[Block]:
    invalid = PlanningReason.INVALID_REQUEST
    blocks = sorted(request.blocks, key=lambda b: b.index)
    if not blocks:
        raise PlanningError(invalid, "the block table is empty")
    if [b.index for b in blocks] != list(range(len(blocks))):
        raise PlanningError(invalid, "blocks must be numbered 0..b-1")
    if not request.targets:
        raise PlanningError(PlanningReason.NO_TARGETS, "no targets to load")
    if not request.sources:
        raise PlanningError(PlanningReason.NO_SOURCES, "no source holds the model")
    pods = [s.pod for s in request.sources] + list(request.targets)
    if len(set(pods)) != len(pods):
        raise PlanningError(invalid, "sources and targets must be distinct pods")
    if not 0 < request.busy_threshold <= 1 or request.chunk_bytes <= 0:
        raise PlanningError(invalid, "busy_threshold must be in (0, 1], chunk_bytes > 0")
    return blocks


def _offers(request: PlanRequest, topo: Topology) -> tuple[list[SourceOffer], list[str]]:
    pods = [s.pod for s in request.sources]
    if request.holdings is not None:
        need = set(range(len(request.blocks)))
        held = {p: set(request.holdings.get(p, ())) for p in pods}
        missing = need - set().union(*held.values())
        if missing:
            raise PlanningError(
                PlanningReason.MISSING_BLOCKS, f"no source holds blocks {sorted(missing)}"
            )
        pods = [p for p in pods if need <= held[p]]
        if not pods:
            raise PlanningError(
                PlanningReason.NO_SOURCES, "every block has a holder but no source holds them all"
            )
    return prune_sources(pods, topo, request.pod_node, request.serving_out, request.busy_threshold)


def _k(request: PlanRequest, strategy: str, usable: int, pruned: Sequence[str]) -> int:
    if request.k is None:
        return usable if strategy == PlanStrategy.CHAIN else min(usable, len(request.targets))
    if request.k < 1:
        raise PlanningError(PlanningReason.INVALID_REQUEST, f"k={request.k} must be >= 1")
    if request.k > usable:
        extra = f" ({len(pruned)} pruned as busy)" if pruned else ""
        raise PlanningError(
            PlanningReason.INSUFFICIENT_SOURCES,
            f"k={request.k} needs {request.k} sources, {usable} usable{extra}",
        )
    return request.k


def _build(
    strategy: str,
    request: PlanRequest,
    blocks: list[Block],
    offers: list[SourceOffer],
    k: int,
    topo: Topology,
) -> Candidate:
    used = offers[:k]
    by_pod = {s.pod: s for s in request.sources}
    spec = ScalePlanSpec(
        deployment=request.deployment,
        model_digest=request.model_digest,
        blocks=blocks,
        sources=[by_pod[o.pod] for o in used],
        targets=list(request.targets),
        strategy=PlanStrategy(strategy),
    )
    groups: list[list[str]] | None = None
    if strategy == PlanStrategy.CHAIN:
        groups_nv = group_by_nvlink(request.targets, topo, request.pod_node)
        spec.chains = greedy_chains(used, groups_nv, topo, request.pod_node, range(len(blocks)))
        if request.shift and len(spec.chains) > 1:
            orders = circular_shift_orders(len(blocks), len(spec.chains))
            for chain, order in zip(spec.chains, orders, strict=True):
                chain.blocks = order
    else:
        schedule = kway_plan(used, request.targets, len(blocks), k, topo, request.pod_node)
        spec.schedule = schedule.steps
        spec.block_orders = schedule.block_orders
        groups = [g.targets for g in schedule.groups]
    pred = predict(
        spec,
        topo,
        request.pod_node,
        chunk_bytes=request.chunk_bytes,
        hop_latency_s=request.hop_latency_s,
        groups=groups,
        source_stages=request.source_stages,
        cooperative=request.cooperative,
        stageless=request.stageless,
    )
    spec.predicted_completion_seconds = shown(pred.completion)
    spec.predictions = pred.targets
    spec.execution_pipelines = pred.pipelines
    return Candidate(spec, pred)
