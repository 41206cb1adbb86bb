"""Whole plans on loopback, every node in one event loop: chains and binomial pipelines."""

from __future__ import annotations

import pytest
from multicast_harness import BLOCK_BYTES, BLOCKS, Run
from multicast_harness import run_plan as harness_run_plan

from cascade_api.scaleplan import PlanStrategy

pytestmark = [pytest.mark.timeout(90), pytest.mark.ucx]


def run_plan(strategy: str, sources: int, targets: int, *, shift: bool = False) -> Run:
    return harness_run_plan(strategy, sources, targets, shift=shift, seed=sources * 10 + targets)


def test_chain_one_source_three_hops() -> None:
    run = run_plan("chain", 1, 3)
    for t in ("t0", "t1", "t2"):
        run.assert_complete(t, arrivals=True)
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
        run.assert_complete(t, arrivals=True)
    # Chain 1 (shifted) got block 4 before block 0.
    second = run.result(run.spec.chains[1].hops[0]).block_arrivals
    assert second[4] < second[0]
    assert run.result("s1").tier == "host"


@pytest.mark.parametrize(("k", "targets"), [(1, 7), (2, 6), (4, 4)])
def test_binomial_k_sources(k: int, targets: int) -> None:
    run = run_plan("binomial", k, targets)
    assert run.spec.strategy == PlanStrategy.BINOMIAL
    for t in (f"t{i}" for i in range(targets)):
        run.assert_complete(t, arrivals=True)
    # The sources sent no more than the schedule asks of them.
    for s in (f"s{i}" for i in range(k)):
        planned = sum(1 for st in run.spec.schedule for tr in st.transfers if tr.sender == s)
        assert run.result(s).bytes_sent == planned * BLOCK_BYTES
