"""The parameter pool: sources, host-copy placement and spread, replacement, restart."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import operator_fixtures as fixtures
from operator_fixtures import holder

from cascade_api import constants as c
from cascade_api.scaleplan import SourceTier
from cascade_operator.weights.pool import (
    HOLDER_LOST,
    NOT_HOLDING,
    PLACED,
    REBALANCED,
    SURPLUS,
    PoolDecision,
    PoolInput,
    decide_pool,
    pool_events,
)
from cascade_operator.weights.workers import WorkerView
from cascade_planner import topology_from_nodes

# Two leaves: n0, n1 on L0; n2, n3 on L1.
TOPO = topology_from_nodes(
    [{"metadata": {"name": f"n{i}", "labels": {c.LABEL_LEAF: f"L{i // 2}"}}} for i in range(4)]
)


def worker(name: str, node: str, **kw: Any) -> WorkerView:
    """A worker on `node` holding all 8 blocks of model m1 and serving, unless told otherwise."""
    return holder(name, node=node, **kw)


def idle(name: str, node: str) -> WorkerView:
    return fixtures.worker(name, node=node)


def pool(workers: list[WorkerView], copies: int = 1, **kw: Any) -> PoolDecision:
    return decide_pool(PoolInput(workers=workers, host_copies=copies, topo=TOPO, **kw))


def apply(workers: list[WorkerView], d: PoolDecision) -> list[WorkerView]:
    """What the I/O layer does: write the annotations the changes ask for."""
    flags = {ch.pod: ch.keep for ch in d.changes}
    return [replace(w, host_copy=flags.get(w.name, w.host_copy)) for w in workers]


def test_first_copy_goes_to_a_holder_and_sources_prefer_it() -> None:
    ws = [worker("p0", "n0"), worker("p1", "n1", engine="off"), idle("p2", "n2")]
    d = pool(ws)
    assert d.model_digest == "m1"
    assert d.holders == ["p0", "p1"]
    # The idle holder takes the copy (sending from it does not compete with serving).
    assert [(ch.pod, ch.keep, ch.reason) for ch in d.changes] == [("p1", True, PLACED)]
    assert d.host_copies == ["p1"]
    assert [(s.pod, s.tier) for s in d.sources] == [("p1", SourceTier.HOST), ("p0", SourceTier.GPU)]
    assert d.load_from_storage is None and d.shortfall == 0


def test_copies_spread_over_leaves_then_nodes() -> None:
    ws = [worker(f"p{i}", f"n{i % 2}") for i in range(4)]  # all on leaf L0
    ws += [worker("p4", "n2"), worker("p5", "n3")]  # leaf L1
    d = pool(ws, copies=3)
    # Both leaves get one before either gets a second; no node holds two.
    assert [(ch.pod, ch.node) for ch in d.changes] == [("p0", "n0"), ("p4", "n2"), ("p1", "n1")]


def test_existing_copies_are_kept_stable() -> None:
    ws = [worker("p0", "n0", host_copy=True), worker("p1", "n2"), worker("p2", "n3")]
    d = pool(ws, copies=2)
    assert [(ch.pod, ch.reason) for ch in d.changes] == [("p1", PLACED)]
    again = pool(apply(ws, d), copies=2)
    assert again.changes == [] and again.host_copies == ["p0", "p1"]


def test_lost_holder_is_replaced_on_another_leaf_if_it_can() -> None:
    ws = [
        worker("p0", "n0", host_copy=True),
        worker("p1", "n2", host_copy=True, alive=False),  # its pod died
        worker("p2", "n1"),
        worker("p3", "n3"),
    ]
    d = pool(ws, copies=2)
    keeps = [(ch.pod, ch.node, ch.reason) for ch in d.changes if ch.keep]
    # p3 is on the leaf that lost its copy (L1); p2 would crowd L0 beside p0.
    assert keeps == [("p3", "n3", HOLDER_LOST)]
    assert d.host_copies == ["p0", "p3"]


def test_a_holder_that_lost_its_model_gives_up_the_flag() -> None:
    ws = [worker("p0", "n0", host_copy=True, phase="failed", blocks_loaded=3), worker("p1", "n1")]
    d = pool(ws)
    assert ("p0", False, NOT_HOLDING) in [(ch.pod, ch.keep, ch.reason) for ch in d.changes]
    assert ("p1", True, HOLDER_LOST) in [(ch.pod, ch.keep, ch.reason) for ch in d.changes]


def test_surplus_copies_are_released_from_the_crowded_leaf() -> None:
    ws = [
        worker("p0", "n0", host_copy=True),
        worker("p1", "n1", host_copy=True),
        worker("p2", "n2", host_copy=True),
    ]
    d = pool(ws, copies=2)
    assert [(ch.pod, ch.keep, ch.reason) for ch in d.changes] == [("p1", False, SURPLUS)]


def test_a_crowded_copy_moves_to_an_empty_leaf() -> None:
    ws = [
        worker("p0", "n0", host_copy=True),
        worker("p1", "n1", host_copy=True),
        worker("p2", "n2"),
    ]
    d = pool(ws, copies=2)
    changes = sorted((ch.pod, ch.keep, ch.reason) for ch in d.changes)
    assert changes == [("p1", False, REBALANCED), ("p2", True, REBALANCED)]
    assert pool(apply(ws, d), copies=2).changes == []


def test_no_copy_anywhere_loads_from_storage_once() -> None:
    ws = [idle("p1", "n1"), idle("p0", "n0")]
    d = pool(ws)
    assert d.load_from_storage == "p0" and d.sources == [] and d.shortfall == 1
    loading = [replace(ws[1], phase="loading"), ws[0]]
    assert pool(loading).load_from_storage is None  # already under way
    assert any(e.reason == "HostCopiesShort" for e in pool_events(d))


def test_busy_holders_count_as_copies_but_not_as_sources() -> None:
    ws = [worker("p0", "n0", phase="transferring", host_copy=True), worker("p1", "n1")]
    d = pool(ws)
    assert d.holders == ["p0", "p1"] and d.host_copies == ["p0"] and d.changes == []
    assert [s.pod for s in d.sources] == ["p1"]


def test_wanted_digest_and_majority_digest() -> None:
    ws = [
        worker("p0", "n0", model_digest="old"),
        worker("p1", "n1", model_digest="new"),
        worker("p2", "n2", model_digest="new"),
    ]
    assert pool(ws).model_digest == "new"
    d = pool(ws, model_digest="old")
    assert d.holders == ["p0"]


def test_zero_host_copies_releases_all() -> None:
    ws = [worker("p0", "n0", host_copy=True)]
    d = pool(ws, copies=0)
    assert [(ch.pod, ch.keep) for ch in d.changes] == [("p0", False)] and d.shortfall == 0


def test_restart_rebuilds_the_same_pool_from_annotations() -> None:
    """A fresh operator sees only pods (annotations) and worker statuses: same decision."""
    ws = [worker(f"p{i}", f"n{i}") for i in range(4)]
    first = pool(ws, copies=2)
    settled = apply(ws, first)
    after_restart = pool(settled, copies=2)
    assert after_restart.changes == []
    assert after_restart.host_copies == first.host_copies
    assert after_restart.sources == first.sources
