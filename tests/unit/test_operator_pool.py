"""The parameter pool: sources (host copies first), holders, and who reads storage."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import operator_fixtures as fixtures
from operator_fixtures import holder

from cascade_api.scaleplan import SourceTier
from cascade_operator.weights.pool import PoolDecision, PoolInput, decide_pool, load_backoff_s
from cascade_operator.weights.workers import WorkerView, job_failures


def worker(name: str, node: str, **kw: Any) -> WorkerView:
    """An instance on `node` holding all 8 blocks of model m1 and serving, unless told otherwise."""
    return holder(name, node=node, **kw)


def host(name: str, node: str, **kw: Any) -> WorkerView:
    """A host copy holding m1 (no engine)."""
    return holder(name, node=node, engine="off", host_copy=True, **kw)


def idle(name: str, node: str, **kw: Any) -> WorkerView:
    return fixtures.worker(name, node=node, **kw)


def pool(workers: list[WorkerView], copies: int = 1, **kw: Any) -> PoolDecision:
    return decide_pool(PoolInput(workers=workers, host_copies=copies, **kw))


def test_sources_prefer_host_copies_then_idle_then_serving_instances() -> None:
    ws = [worker("p0", "n0"), worker("p1", "n1", engine="off"), host("h0", "n2"), idle("p2", "n3")]
    d = pool(ws)
    assert d.model_digest == "m1"
    assert d.holders == ["h0", "p0", "p1"] and d.host_copies == ["h0"] and d.shortfall == 0
    assert [(s.pod, s.tier) for s in d.sources] == [
        ("h0", SourceTier.HOST),
        ("p1", SourceTier.GPU),
        ("p0", SourceTier.GPU),
    ]
    assert "1/1 host copies on h0" in d.message


def test_a_host_copy_without_the_model_is_short_and_not_a_source() -> None:
    ws = [worker("p0", "n0"), idle("h0", "n1", host_copy=True)]
    d = pool(ws)
    assert d.host_copies == [] and d.shortfall == 1
    assert [s.pod for s in d.sources] == ["p0"] and d.load_from_storage is None


def test_no_copy_anywhere_loads_from_storage_once_an_instance_first() -> None:
    ws = [idle("h0", "n2", host_copy=True), idle("p1", "n1"), idle("p0", "n0")]
    d = pool(ws)
    assert d.load_from_storage == "p0" and d.sources == [] and d.shortfall == 1
    loading = [replace(ws[2], phase="loading"), ws[0], ws[1]]
    assert pool(loading).load_from_storage is None  # already under way


def test_at_zero_replicas_the_host_copy_loads_from_storage() -> None:
    d = pool([idle("h1", "n1", host_copy=True), idle("h0", "n0", host_copy=True)], copies=2)
    assert d.load_from_storage == "h0"


def test_busy_holders_count_as_copies_but_not_as_sources() -> None:
    ws = [host("h0", "n0", phase="transferring"), worker("p1", "n1")]
    d = pool(ws)
    assert d.holders == ["h0", "p1"] and d.host_copies == ["h0"]
    assert [s.pod for s in d.sources] == ["p1"]


def test_wanted_digest_and_majority_digest() -> None:
    ws = [
        worker("p0", "n0", model_digest="old"),
        worker("p1", "n1", model_digest="new"),
        host("h0", "n2", model_digest="new"),
    ]
    assert pool(ws).model_digest == "new"
    d = pool(ws, model_digest="old")
    assert d.holders == ["p0"] and d.host_copies == [] and d.shortfall == 1


def test_zero_host_copies_wanted_is_never_short() -> None:
    assert pool([worker("p0", "n0")], copies=0).shortfall == 0


def test_a_worker_whose_loads_fail_is_asked_again_only_after_a_growing_capped_wait() -> None:
    """A refused or failed load is reported (failures in a row, when); the next order
    waits 1, 2, 4 ... s, at most 60, instead of one a tick forever."""
    assert [load_backoff_s(n) for n in (0, 1, 2, 3, 7, 20)] == [0, 1, 2, 4, 60, 60]
    failed = idle("p0", "n0", phase="failed", error="load: not a model directory")
    t = 1000.0
    for failures, wait in ((1, 1.0), (3, 4.0), (9, 60.0)):
        w = replace(failed, failures=failures, failed_at=t)
        waiting = pool([w], copies=0, now=t + wait - 0.1)
        assert waiting.load_from_storage is None
        assert f"backs off: p0 failed {failures} time(s), next try in 0 s" in waiting.message
        assert pool([w], copies=0, now=t + wait).load_from_storage == "p0"
    # Another worker that has not failed loads meanwhile; without a clock, no backoff.
    w = replace(failed, failures=2, failed_at=t)
    assert pool([w, idle("p1", "n1")], copies=0, now=t).load_from_storage == "p1"
    assert pool([w], copies=0).load_from_storage == "p0"


def test_degraded_names_the_pod_its_model_and_the_workers_reason() -> None:
    failed = replace(
        idle("p0", "n0", phase="failed", error="load: modelPath: /etc is not a model directory"),
        failures=3,
    )
    shown = job_failures([failed, idle("p1", "n1")], "file:///etc")
    assert shown == {
        "p0": "load: modelPath: /etc is not a model directory "
        "(model file:///etc; 3 failure(s) in a row)"
    }
