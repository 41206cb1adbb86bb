"""`plan(request, topology) -> ScalePlanSpec`: the decision the operator calls.

Steps, each a small function: validate the request (typed `PlanningError` on bad or
insufficient input), drop sources that do not hold every block, prune sources busy
with serving traffic (blitz.prune_sources), then build the candidate plans —
`chain` (BlitzScale: NVLink groups, greedy multi-chains by bandwidth and leaf) and
`binomial` (λScale: k-way binomial pipeline with circular-shift orders) — predict each
with the flow model, and for `auto` keep the one whose last target completes first
(within 1 %, the chain plan: fewer connections, simpler recovery; `plan` times the
binomial candidate before it builds it, `plan_candidates` builds both). The spec carries
the prediction: completion, per-target times, and the execution pipelines that can form
while blocks arrive. Pure: no clock, no I/O; the same request gives the same plan. Both
entry points run with the cyclic garbage collector paused (gc_pause.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from cascade_api.scaleplan import Block, PlanStrategy, ScalePlanSpec, Source
from cascade_planner.binomial import SubGroup, schedule_of
from cascade_planner.binomial_time import completion, step_ends
from cascade_planner.blitz import SourceOffer, greedy_chains, group_by_nvlink, prune_sources
from cascade_planner.errors import PlanningError, PlanningReason
from cascade_planner.flow import shown
from cascade_planner.gc_pause import collector_paused
from cascade_planner.kway import kway_groups
from cascade_planner.orders import circular_shift_orders
from cascade_planner.predict import Prediction, predict
from cascade_planner.spec import DEFAULT_CHUNK_BYTES
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
    chunk_bytes: int = DEFAULT_CHUNK_BYTES  # the executor's chunk: a chain hop's fill
    hop_latency_s: float = 0.0  # start cost per chain hop (and per binomial step ...)
    step_latency_s: float | None = None  # ... unless this is set: per binomial step
    # Live scale-ups: sources may serve as the last stage of an execution pipeline.
    source_stages: bool = False
    cooperative: bool = False  # ... from the target's first block (BlitzScale 5.2)
    # ... only where a pipeline serves this long before a member could serve alone.
    pipeline_lead_s: float = 0.0
    # Targets that run no engine (host copies): they receive, never join a pipeline.
    stageless: Collection[str] = ()


@dataclass(frozen=True)
class Candidate:
    spec: ScalePlanSpec
    prediction: Prediction


@collector_paused
def plan(request: PlanRequest, topo: Topology) -> ScalePlanSpec:
    """The plan for `request` on `topo`; PlanningError (with a reason) if none can be made.

    `auto` decides as `plan_candidates` does but pays in full only for the plan it keeps:
    the chain plan is built and predicted, the binomial plan is first only timed from its
    sub-groups (binomial_time.py: the completion its full prediction would report, the
    same float, without its ~16,000 transfers at 512 targets or its pipelines) and built
    only when that time wins. Same comparison, same numbers, so the same spec, reason
    included."""
    strategy, blocks, offers, pruned, k = _prepare(request, topo)
    if strategy != AUTO:
        return _noted([_build(strategy, request, blocks, offers, k, topo)], pruned)[0].spec
    chain = _build(PlanStrategy.CHAIN, request, blocks, offers, k, topo)
    groups = kway_groups(offers[:k], request.targets, len(blocks), k, topo, request.pod_node)
    sizes = {b.index: b.bytes for b in blocks}
    step = start_cost(request, PlanStrategy.BINOMIAL)
    ends = step_ends(groups, sizes, topo, request.pod_node, len(blocks), step)
    timed = shown(completion(groups, len(blocks), ends))
    if not _binomial_wins(timed, chain.prediction.completion):
        _auto_reason(chain, PlanStrategy.BINOMIAL, timed)
        return _noted([chain], pruned)[0].spec
    binomial = _build(PlanStrategy.BINOMIAL, request, blocks, offers, k, topo, groups)
    _auto_reason(binomial, PlanStrategy.CHAIN, chain.prediction.completion)
    return _noted([binomial], pruned)[0].spec


@collector_paused
def plan_candidates(request: PlanRequest, topo: Topology) -> list[Candidate]:
    """Every strategy the request allows, each built and predicted in full, chosen first."""
    strategy, blocks, offers, pruned, k = _prepare(request, topo)
    names = [PlanStrategy.CHAIN, PlanStrategy.BINOMIAL] if strategy == AUTO else [strategy]
    found = [_build(s, request, blocks, offers, k, topo) for s in names]
    if len(found) == 2:
        chain, binomial = found
        if _binomial_wins(binomial.prediction.completion, chain.prediction.completion):
            found.reverse()
        _auto_reason(found[0], found[1].spec.strategy, found[1].prediction.completion)
    return _noted(found, pruned)


def _prepare(
    request: PlanRequest, topo: Topology
) -> tuple[str, list[Block], list[SourceOffer], list[str], int]:
    """(strategy, blocks, usable sources, pruned pods, k), or PlanningError."""
    strategy = _strategy(request.strategy)
    blocks = _validate(request)
    offers, pruned = _offers(request, topo)
    return strategy, blocks, offers, pruned, _k(request, strategy, len(offers), pruned)


def start_cost(request: PlanRequest, strategy: str) -> float:
    """The per-hop (chain) or per-step (binomial) start cost a plan is predicted with."""
    if strategy == PlanStrategy.BINOMIAL and request.step_latency_s is not None:
        return request.step_latency_s
    return request.hop_latency_s


def _binomial_wins(binomial: float, chain: float) -> bool:
    return binomial < chain * (1 - TIE_MARGIN)


def _auto_reason(chosen: Candidate, loser: str, loser_seconds: float) -> None:
    chosen.spec.reason = (
        f"auto: {chosen.spec.strategy} {chosen.prediction.completion:.4g}s vs "
        f"{loser} {loser_seconds:.4g}s predicted"
    )


def _noted(found: list[Candidate], pruned: Sequence[str]) -> list[Candidate]:
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
    groups: list[SubGroup] | None = None,  # binomial: kway_groups, when already made
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
        hop_latency_seconds=start_cost(request, strategy),
    )
    members: list[list[str]] | None = None
    if strategy == PlanStrategy.CHAIN:
        groups_nv = group_by_nvlink(request.targets, topo, request.pod_node)
        spec.chains = greedy_chains(used, groups_nv, topo, request.pod_node, range(len(blocks)))
        if request.shift and len(spec.chains) > 1:
            orders = circular_shift_orders(len(blocks), len(spec.chains))
            for chain, order in zip(spec.chains, orders, strict=True):
                chain.blocks = order
    else:
        if groups is None:
            groups = kway_groups(used, request.targets, len(blocks), k, topo, request.pod_node)
        schedule = schedule_of(groups, len(blocks))
        spec.schedule = schedule.steps
        spec.block_orders = schedule.block_orders
        members = [g.targets for g in schedule.groups]
    pred = predict(
        spec,
        topo,
        request.pod_node,
        chunk_bytes=request.chunk_bytes,
        hop_latency_s=spec.hop_latency_seconds,
        groups=members,
        source_stages=request.source_stages,
        cooperative=request.cooperative,
        pipeline_lead_s=request.pipeline_lead_s,
        stageless=request.stageless,
        subgroups=groups,
    )
    spec.predicted_completion_seconds = shown(pred.completion)
    spec.predictions = pred.targets
    spec.execution_pipelines = pred.pipelines
    return Candidate(spec, pred)
