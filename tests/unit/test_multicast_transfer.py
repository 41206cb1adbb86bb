"""Whole plans on loopback, every node in one event loop: chains and binomial pipelines."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from cascade_api.scaleplan import PlanStrategy
from cascade_worker.multicast import NodeOptions, NodeResult
from cascade_worker.multicast.local import LocalRun, Scenario, run_local

pytestmark = pytest.mark.timeout(90)

BLOCKS = 8
BLOCK_BYTES = 256 * 1024
FAST = NodeOptions(chunk_bytes=64 * 1024, stall_timeout_s=5, deadline_s=20, linger_s=0.5)


class Run:
    def __init__(self, run: LocalRun) -> None:
        self.spec, self.buffers, self.stores, self.results = (
            run.spec,
            run.buffers,
            run.stores,
            run.results,
        )

    def result(self, pod: str) -> NodeResult:
        r = self.results[pod]
        assert isinstance(r, NodeResult), f"{pod}: {r!r}"
        return r

    def assert_complete(self, pod: str) -> None:
        store = self.stores[pod]
        assert store.complete(), f"{pod} misses {store.missing()}"
        for i, buf in enumerate(self.buffers):
            assert np.array_equal(store.buffer(i), buf)
        r = self.result(pod)
        assert r.missing == [] and sorted(r.block_arrivals) == list(range(BLOCKS))
        assert r.complete_s == max(r.block_arrivals.values())


def run_plan(
    strategy: str,
    sources: int,
    targets: int,
    options: NodeOptions | Mapping[str, NodeOptions] = FAST,
    scenario: Scenario | None = None,
    shift: bool = False,
) -> Run:
    return Run(
        run_local(
            strategy,
            sources,
            targets,
            num_blocks=BLOCKS,
            block_bytes=BLOCK_BYTES,
            options=options,
            scenario=scenario,
            shift=shift,
            seed=sources * 10 + targets,
        )
    )


def test_chain_one_source_three_hops() -> None:
    run = run_plan("chain", 1, 3)
    for t in ("t0", "t1", "t2"):
        run.assert_complete(t)
    src = run.result("s0")
    assert src.role == "source" and src.tier == "gpu" and src.complete_s == 0.0
    # Forwarding: each hop sent the model on exactly once, the last hop sent nothing.
    model = BLOCKS * BLOCK_BYTES
    assert [run.result(t).bytes_sent for t in ("t0", "t1", "t2")] == [model, model, 0]
    assert src.bytes_sent == model
    # The whole model became ready as one layer range at the end (execute-while-load hook).
    assert run.result("t2").layers_ready[-1][1:] == (0, BLOCKS)


def test_chain_two_sources_two_chains() -> None:
    run = run_plan("chain", 2, 5, shift=True)
    assert len(run.spec.chains) == 2
    for t in (f"t{i}" for i in range(5)):
        run.assert_complete(t)
    # Chain 1 (shifted) got block 4 before block 0.
    second = run.result(run.spec.chains[1].hops[0]).block_arrivals
    assert second[4] < second[0]
    assert run.result("s1").tier == "host"


@pytest.mark.parametrize(("k", "targets"), [(1, 7), (2, 6), (4, 4)])
def test_binomial_k_sources(k: int, targets: int) -> None:
    run = run_plan("binomial", k, targets)
    assert run.spec.strategy == PlanStrategy.BINOMIAL
    for t in (f"t{i}" for i in range(targets)):
        run.assert_complete(t)
    # The sources sent no more than the schedule asks of them.
    for s in (f"s{i}" for i in range(k)):
        planned = sum(1 for st in run.spec.schedule for tr in st.transfers if tr.sender == s)
        assert run.result(s).bytes_sent == planned * BLOCK_BYTES
