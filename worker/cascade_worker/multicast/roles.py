"""What one node does in a plan: derived from the ScalePlan spec alone (pure).

Every node reads the same spec and works out its own part, so no coordinator has to
hand out per-node instructions:

- sources hold every block and only serve; the first source is the *leader* that runs
  the common start (and collects completion reports);
- in a chain, a hop's *upstreams* are its predecessors nearest first, ending with the
  chain's source. It pulls from the first live one; when that one dies it re-attaches to
  the next (the nearest live upstream) and asks only for what it still misses;
- in a binomial plan, a target's *incoming* transfers are (step, sender, block) in step
  order, executed one after another; every node's *outgoing* ones are served in step
  order (order.py);
- *fallbacks* are the sources, own sub-group/chain source first: where a block comes
  from when every planned sender failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from cascade_api.scaleplan import PlanStrategy, ScalePlanSpec


@dataclass(frozen=True)
class Role:
    node: str
    strategy: PlanStrategy
    leader: str
    is_source: bool
    tier: str | None  # "gpu" / "host" for sources, None for targets
    blocks: list[int]  # every block of the model
    wanted: list[int] = field(default_factory=list)  # blocks to receive, in arrival order
    upstreams: list[str] = field(default_factory=list)  # chain: nearest live one first
    incoming: list[tuple[int, str, int]] = field(default_factory=list)  # (step, sender, block)
    outgoing: list[tuple[int, str, int]] = field(default_factory=list)  # (step, receiver, block)
    fallbacks: list[str] = field(default_factory=list)
    participants: list[str] = field(default_factory=list)  # every pod in the plan

    @property
    def contacts(self) -> list[str]:
        """Peers this node will pull from (to prewarm), nearest/earliest first, no repeats."""
        seen: dict[str, None] = {}
        for peer in [*self.upstreams, *(s for _, s, _ in self.incoming), *self.fallbacks]:
            if peer != self.node:
                seen.setdefault(peer, None)
        return list(seen)


def participants(spec: ScalePlanSpec) -> list[str]:
    pods = [s.pod for s in spec.sources] + list(spec.targets)
    for chain in spec.chains:
        pods += [chain.source, *chain.hops]
    for step in spec.schedule:
        for tr in step.transfers:
            pods += [tr.sender, tr.receiver]
    return list(dict.fromkeys(pods))


def role_for(spec: ScalePlanSpec, me: str) -> Role:
    """This node's part of the plan; ValueError if `me` is not in it."""
    if not spec.sources:
        raise ValueError("plan has no sources")
    pods = participants(spec)
    if me not in pods:
        raise ValueError(f"{me!r} is not part of the plan ({', '.join(pods)})")
    strategy = PlanStrategy(spec.strategy)
    blocks = [b.index for b in spec.blocks]
    tiers = {s.pod: str(s.tier) for s in spec.sources}
    base = Role(
        node=me,
        strategy=strategy,
        leader=spec.sources[0].pod,
        is_source=me in tiers,
        tier=tiers.get(me),
        blocks=blocks,
        participants=pods,
    )
    base = replace(
        base,
        outgoing=[
            (index, tr.receiver, tr.block)
            for index, step in enumerate(spec.schedule)
            for tr in step.transfers
            if tr.sender == me
        ],
    )
    if base.is_source:
        return base
    sources = list(tiers)
    if strategy == PlanStrategy.CHAIN:
        for chain in spec.chains:
            if me in chain.hops:
                pos = chain.hops.index(me)
                order = list(chain.blocks) or blocks
                return replace(
                    base,
                    wanted=order + [b for b in blocks if b not in order],
                    upstreams=[*reversed(chain.hops[:pos]), chain.source],
                    fallbacks=[chain.source, *(s for s in sources if s != chain.source)],
                )
        raise ValueError(f"{me!r} is a target but on no chain")
    incoming = [
        (index, tr.sender, tr.block)
        for index, step in enumerate(spec.schedule)
        for tr in step.transfers
        if tr.receiver == me
    ]
    origin = _origin(spec, me, sources)
    return replace(
        base,
        wanted=list(dict.fromkeys([b for _, _, b in incoming] + blocks)),
        incoming=incoming,
        fallbacks=[origin, *(s for s in sources if s != origin)],
    )


def _origin(spec: ScalePlanSpec, me: str, sources: list[str]) -> str:
    """The source whose sub-group `me` is in: follow senders back to a source."""
    sender_of: dict[str, str] = {}
    for step in spec.schedule:
        for tr in step.transfers:
            sender_of.setdefault(tr.receiver, tr.sender)
    node, hops = me, 0
    while node in sender_of and node not in sources and hops <= len(sender_of):
        node, hops = sender_of[node], hops + 1
    return node if node in sources else sources[0]
