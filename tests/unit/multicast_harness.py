"""Shared harness of the in-process multicast tests: a small model, fast options, and a
`Run` wrapper with the assertions every transfer test makes."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cascade_worker.multicast import NodeOptions, NodeResult
from cascade_worker.multicast.local import LocalRun, Scenario, run_local

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

    def assert_complete(self, pod: str, *, arrivals: bool = False) -> None:
        """Byte-identical to the source, nothing missing; with `arrivals`, every block
        has an arrival time and the last one is the completion time."""
        store = self.stores[pod]
        assert store.complete(), f"{pod} misses {store.missing()}"
        for i, buf in enumerate(self.buffers):
            assert np.array_equal(store.buffer(i), buf)
        r = self.result(pod)
        assert r.missing == []
        if arrivals:
            assert sorted(r.block_arrivals) == list(range(BLOCKS))
            assert r.complete_s == max(r.block_arrivals.values())


def run_plan(
    strategy: str,
    sources: int,
    targets: int,
    options: NodeOptions | Mapping[str, NodeOptions] = FAST,
    scenario: Scenario | None = None,
    *,
    shift: bool = False,
    seed: int = 0,
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
            seed=seed,
        )
    )
