"""Integration fixtures: one real local cluster (`cascade dev up --nodes 4`) per session.

`dev_cluster` starts it on first use and runs `cascade dev down` at the end of the session.
The cluster binds fixed ports (6443, 23790), so it lives in its own state dir, and tests
marked `runs_first` (the up/down lifecycle test, which needs the ports to itself) are
moved to the front of the session. Set CASCADE_DEV_REUSE=1 to use (and keep) the cluster
of the default state dir instead: fast local iteration.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from integration_helpers import ensure_example_model

from cascade_dev.paths import default_state_dir
from cascade_dev.testing import DevCluster, apiserver_port_busy, cascade_dev, missing_prerequisites

# Issue 5's acceptance cluster: 8 nodes (one node agent process serves them all, so more
# nodes cost no time); test_scaleplan.py skips on a reused cluster with fewer.
NODES = int(os.environ.get("CASCADE_TEST_NODES", "8"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = [i for i in items if getattr(getattr(i, "function", None), "runs_first", False)]
    if first:
        items[:] = first + [i for i in items if i not in first]


@pytest.fixture(scope="session")
def dev_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    reason = missing_prerequisites()
    if reason:
        pytest.skip(reason)
    reuse = os.environ.get("CASCADE_DEV_REUSE") == "1"
    state_dir = default_state_dir() if reuse else tmp_path_factory.mktemp("cascade-dev")
    if not reuse and apiserver_port_busy():
        pytest.fail(
            "port 6443 is in use: another local cluster runs (`cascade dev down` it, "
            "or set CASCADE_DEV_REUSE=1 to test against it)"
        )
    ensure_example_model()
    cascade_dev(state_dir, "up", "--nodes", str(NODES))
    try:
        yield DevCluster.at(state_dir, NODES)
    finally:
        if not reuse:
            cascade_dev(state_dir, "down")
