"""Integration fixtures: one real local cluster (`cascade dev up`) shared by the session.

`dev_cluster` starts it on first use and runs `cascade dev down` at the end of the session.
The cluster binds fixed ports (6443, 23790), so it lives in its own state dir, and tests
marked `runs_first` (the up/down lifecycle tests, which need the ports to themselves and
start clusters of their own) are moved to the front of the session. Set
CASCADE_DEV_REUSE=1 to use (and keep) the cluster of the default state dir instead: fast
local iteration.

Its size: CASCADE_TEST_NODES (default 8: one node agent process serves them all, so more
nodes cost no time), or more when a selected test is marked `nodes(N)` with a larger N;
`up` reconciles a reused cluster to that count. A test marked `nodes(N)` that meets fewer
fails, it does not skip. Without the kube binaries or etcd the tier skips, saying what is
missing, and under CI=true fails instead (cascade_dev.testgate).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration_helpers import (
    TEST_MODELS,
    Namespace,
    ensure_example_model,
    namespace_with_operator,
)

from cascade_dev.paths import default_state_dir
from cascade_dev.testgate import cluster_nodes
from cascade_dev.testing import DevCluster, apiserver_port_busy, cascade_dev, require_cluster

FAILED = pytest.StashKey[bool]()
OPERATOR_LOG_TAIL = 3000  # characters of the operator's log shown when a test fails

NODES = int(os.environ.get("CASCADE_TEST_NODES", "8"))
SESSION_NODES = pytest.StashKey[int]()  # the count the session's cluster is brought up with


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "nodes(n): needs a dev cluster of at least n nodes (the session's grows)"
    )


def needed_nodes(item: pytest.Item) -> int | None:
    marker = item.get_closest_marker("nodes")
    return int(marker.args[0]) if marker is not None else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    first = [i for i in items if getattr(getattr(i, "function", None), "runs_first", False)]
    if first:
        items[:] = first + [i for i in items if i not in first]
    needs = [n for i in items if (n := needed_nodes(i)) is not None]
    config.stash[SESSION_NODES] = cluster_nodes(NODES, needs)


@pytest.fixture(scope="session")
def dev_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevCluster]:
    require_cluster()
    nodes = request.config.stash.get(SESSION_NODES, NODES)
    reuse = os.environ.get("CASCADE_DEV_REUSE") == "1"
    state_dir = default_state_dir() if reuse else tmp_path_factory.mktemp("cascade-dev")
    if not reuse and apiserver_port_busy():
        pytest.fail(
            "port 6443 is in use: another local cluster runs (`cascade dev down` it, "
            "or set CASCADE_DEV_REUSE=1 to test against it)"
        )
    ensure_example_model()
    cascade_dev(state_dir, "up", "--nodes", str(nodes))
    try:
        yield DevCluster.at(state_dir, nodes)
    finally:
        if not reuse:
            cascade_dev(state_dir, "down")
        shutil.rmtree(TEST_MODELS, ignore_errors=True)  # small_model's checkpoints


@pytest.fixture(autouse=True)
def _enough_nodes(request: pytest.FixtureRequest) -> None:
    """A test marked `nodes(N)` runs on at least N nodes, or fails saying so."""
    needed = needed_nodes(request.node)
    if needed is None:
        return
    dev: DevCluster = request.getfixturevalue("dev_cluster")
    if dev.nodes < needed:
        pytest.fail(f"needs {needed} nodes, the session's dev cluster has {dev.nodes}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, dev_cluster: DevCluster, tmp_path: Path
) -> Iterator[Namespace]:
    """A fresh namespace `cascade-<module>-<hex>` watched by its own operator process
    (integration_helpers.namespace_with_operator); the operator's log tail is printed
    when the test failed."""
    module = request.node.module.__name__.removeprefix("test_").replace("_", "-")
    with namespace_with_operator(dev_cluster, f"cascade-{module}", tmp_path) as ns:
        yield ns
        log = tmp_path / "operator.log"
        if request.node.stash.get(FAILED, False) and log.exists():
            print(f"--- {log} (tail) ---\n{log.read_text()[-OPERATOR_LOG_TAIL:]}")
