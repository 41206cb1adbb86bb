"""The planner's fast paths give what the full paths give, float for float, on seeded
random fabrics and requests (planner_cases.py): `plan` (auto times the binomial plan
before building it) against `plan_candidates` (every candidate in full), binomial times
from index schedules against the transfer walk, and the flow model and pacing against
their pre-issue-15 versions (planner_reference.py)."""

from __future__ import annotations

import itertools
import random

import pytest
from planner_cases import random_case, random_nodes, random_params
from planner_reference import max_min_rates as max_min_rates_before
from planner_reference import predict_chains as predict_chains_before
from planner_reference import send_capped_copy

from cascade_api.scaleplan import PlanStrategy, ScalePlanSpec
from cascade_planner import PlanningError, plan, plan_candidates
from cascade_planner.binomial import schedule_of
from cascade_planner.binomial_time import step_ends
from cascade_planner.blitz import prune_sources
from cascade_planner.flow import max_min_rates, predict_chains, predict_steps
from cascade_planner.kway import kway_groups
from cascade_planner.pipelines import earliest_cover
from cascade_planner.predict import predict
from cascade_planner.topology import Link, send_capped

SEEDS = range(150)


@pytest.mark.parametrize("strategy", ["auto", "chain", "binomial"])
def test_plan_is_the_first_candidate_built_in_full(strategy: str) -> None:
    for seed in SEEDS:
        request, topo = random_case(seed, strategy)
        try:
            fast = plan(request, topo)
        except PlanningError as err:
            with pytest.raises(PlanningError) as full:
                plan_candidates(request, topo)
            assert full.value.reason == err.reason, seed
            continue
        assert fast == plan_candidates(request, topo)[0].spec, seed


def test_binomial_times_from_index_schedules_match_the_transfer_walk() -> None:
    for seed in SEEDS:
        request, topo = random_case(seed)
        rng = random.Random(seed)
        pods = [s.pod for s in request.sources]
        offers, _ = prune_sources(pods, topo, request.pod_node, {}, 1.0)
        b = len(request.blocks)
        k = rng.randint(1, min(len(offers), len(request.targets)))
        groups = kway_groups(offers, request.targets, b, k, topo, request.pod_node)
        schedule = schedule_of(groups, b)
        size = {blk.index: blk.bytes for blk in request.blocks}
        node = request.pod_node.get
        steps = [
            [
                (node(t.sender, t.sender), node(t.receiver, t.receiver), size[t.block])
                for t in s.transfers
            ]
            for s in schedule.steps
        ]
        full = predict_steps(steps, topo.path, topo.capacity, hop_latency_s=request.hop_latency_s)
        fast = step_ends(groups, size, topo, request.pod_node, b, request.hop_latency_s)
        assert fast == full, seed
        spec = ScalePlanSpec(
            deployment="d",
            model_digest="m",
            blocks=list(request.blocks),
            sources=[s for s in request.sources if s.pod in {g.source for g in groups}],
            targets=list(request.targets),
            strategy=PlanStrategy.BINOMIAL,
            schedule=schedule.steps,
            block_orders=schedule.block_orders,
        )
        kw = {
            "chunk_bytes": request.chunk_bytes,
            "hop_latency_s": request.hop_latency_s,
            "source_stages": request.source_stages,
            "stageless": request.stageless,
        }
        walked = predict(spec, topo, request.pod_node, **kw)
        indexed = predict(spec, topo, request.pod_node, subgroups=groups, **kw)
        assert indexed == walked, seed


def test_chain_times_match_the_flow_model_before_issue_15() -> None:
    for seed in SEEDS:
        request, topo = random_case(seed, "chain")
        try:
            spec = plan(request, topo)
        except PlanningError:
            continue
        node = request.pod_node.get
        routes = [[node(p, p) for p in (ch.source, *ch.hops)] for ch in spec.chains]
        sizes = [[spec.blocks[i].bytes for i in ch.blocks] for ch in spec.chains]
        kw = {"fill_bytes": 1 << 20, "hop_latency_s": request.hop_latency_s}
        now = predict_chains(routes, sizes, topo.path, topo.capacity, **kw)
        before = predict_chains_before(routes, sizes, topo.path, topo.capacity, **kw)
        assert (now.complete, now.arrivals) == before, seed


def test_chain_times_on_random_fabrics_match_the_scalar_model() -> None:
    """predict_chains (chain_rates' filling) against the pre-issue-15 model, on fabrics plan() never
    makes: links crossed twice, one link under many chains, chains of blocks of mixed
    sizes or none, hop latencies. (A hop with no links is unconstrained: its progress
    becomes inf * 0 at a zero-length event, where the scalar model's NaN handling
    differs; Topology.path never returns no links.)"""
    for seed in range(400):
        rng = random.Random(seed)
        links: list[Link] = [(("l", i), ("m", i)) for i in range(rng.randint(1, 6))]
        cap = {link: rng.choice([1.0, 2.5, 10.0, 1e9]) for link in links}
        routes, sizes = [], []
        for c in range(rng.randint(1, 4)):
            routes.append([f"c{c}n{j}" for j in range(rng.randint(1, 6))])
            sizes.append([rng.choice([1, 3, 8]) for _ in range(rng.randint(0, 5))])
        crossed = {
            (a, b): [rng.choice(links) for _ in range(rng.randint(1, 3))]
            for route in routes
            for a, b in itertools.pairwise(route)
        }
        path = lambda a, b, crossed=crossed: crossed[(a, b)]  # noqa: E731
        kw = {"fill_bytes": rng.choice([0, 1, 2.5]), "hop_latency_s": rng.choice([0.0, 1e-3])}
        try:
            before = predict_chains_before(routes, sizes, path, cap.__getitem__, **kw)
        except ValueError:
            with pytest.raises(ValueError):
                predict_chains(routes, sizes, path, cap.__getitem__, **kw)
            continue
        now = predict_chains(routes, sizes, path, cap.__getitem__, **kw)
        assert (now.complete, now.arrivals) == before, seed


def test_max_min_rates_match_the_version_before_issue_15() -> None:
    for seed in range(500):
        rng = random.Random(seed)
        links: list[Link] = [(("l", i), ("m", i)) for i in range(rng.randint(1, 8))]
        cap = {link: rng.choice([1.0, 2.5, 10.0, 1e9]) for link in links}
        n = rng.randint(1, 12)
        paths = [[rng.choice(links) for _ in range(rng.randint(0, 3))] for _ in range(n)]
        upstream = [rng.randrange(-1, i) if i and rng.random() < 0.5 else -1 for i in range(n)]
        for up in (None, upstream):
            got = max_min_rates(paths, cap.__getitem__, up)
            assert got == max_min_rates_before(paths, cap.__getitem__, up), seed


def test_pipelines_whose_members_share_their_last_block_never_start_early() -> None:
    """form_pipelines skips such candidates without searching (pipelines.py)."""
    for seed in range(300):
        rng = random.Random(seed)
        b, members = rng.randint(1, 8), [f"m{i}" for i in range(rng.randint(2, 5))]
        last = rng.randrange(b)
        arrivals = {}
        for m in members:
            times = [rng.choice([0.5, 1.0, 2.0, 3.0]) for _ in range(b)]
            times[last] = max(times) + rng.choice([0.0, 1.0])
            arrivals[m] = times
        found = earliest_cover(members, arrivals, b)
        if found is not None:
            ready, stages = found
            assert ready >= min(max(arrivals[p]) for p, _, _ in stages), seed


def test_a_paced_fabric_reads_as_the_copy_before_issue_15() -> None:
    for seed in range(40):
        rng = random.Random(seed)
        from cascade_planner import topology_from_nodes

        topo = topology_from_nodes(random_nodes(rng, rng.choice([4, 40])), random_params(rng))
        first, second = rng.choice([10_000, 90_000]), rng.choice([None, 20_000, 500_000])
        view, copy = send_capped(topo, first), send_capped_copy(topo, first)
        if second is not None:
            view, copy = send_capped(view, second), send_capped_copy(copy, second)
        assert view.send_cap == copy.send_cap and view.params == copy.params
        for name in [*topo.nodes, "elsewhere"]:
            assert view.info(name) == copy.info(name)
        for link in [*topo._cap, (("node", "elsewhere"), ("leaf", ("", "")))]:
            assert view.capacity(link) == copy.capacity(link)
        assert dict(view.graph.edges) == dict(copy.graph.edges)
