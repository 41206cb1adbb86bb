"""Issue 10 acceptance 3 on the local cluster: a load that breaks the ITL SLO makes the
worker's max batch fall, and the SLO holds.

One ModelDeployment of tiny-llama (`engine.maxBatchSize: 32`, `engine.adaptiveBatch:
true`, `slo.interactive.itlMs: SLO_MS`, one fixed replica: no `scaling.maxReplicas`, so
only the local autoscaler acts) on the session cluster with each node's pods held to
NODE_CPU cores (`cascade dev up --node-cpu`, set for this module and put back after).
CLIENTS closed-loop clients stream interactive completions (MAX_TOKENS greedy tokens)
through the gateway for RUN_S seconds, so the batch is full and requests wait; a poller
reads the worker's GET /v1/load (max_batch and the last judged window's LBP/TBP) every
POLL_S. The test prints a timeline (pytest -s) and asserts that the cap fell below 32 and
stayed below it, and that ITL over the last third of the run holds the SLO: the worker's
own window ITL (p50) and the clients' (p50).

The SLO comes from client and window ITL measured on this 2-core machine, same model,
quota 0.5 (the worker runs 1 torch thread under it, as the node agent sets
OMP_NUM_THREADS from the quota), max batch 32, 40 closed-loop clients through the
gateway. Session 15 (workers wake on UCX completions instead of spinning, the
transport off the quota): client ITL p50 13.3-13.9 ms at the engine's max batch, so
the old 15 ms SLO held at 32 already; with 10 ms the cap falls to 3-9 and the last third
runs at 8.6 ms (client) / 8.2 ms (window). (Before: 23-25 ms at 32, a 15 ms SLO, 13 ms in
the last third.) A faster machine may meet 10 ms at 32: set
CASCADE_TEST_CLUSTER_ITL_SLO_MS lower (the test says so).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import yaml
from integration_helpers import (
    Namespace,
    auth_headers,
    model_deployment,
    namespace_with_operator,
)
from itl_load import Arrivals, Request, assert_slo_broken_at_first, drive, summarize, timeline

from cascade_api.constants import WORKER_PORT
from cascade_dev.cgroups import CpuCgroups
from cascade_dev.testing import DevCluster, cascade_dev, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MD = "itl"
MAX_BATCH = 32
NODE_CPU = "0.5"
SLO_MS = float(os.environ.get("CASCADE_TEST_CLUSTER_ITL_SLO_MS", "10"))
CLIENTS = 40
MAX_TOKENS = 32
RUN_S = 36.0
POLL_S = 0.5
NODE_CPU_LABEL = "cascade.dev/node-cpu"


def manifest() -> dict[str, Any]:
    engine = {"maxBatchSize": MAX_BATCH, "adaptiveBatch": True}
    return model_deployment(MD, 1, engine=engine, slo={"interactive": {"itlMs": int(SLO_MS)}})


@pytest.fixture(scope="module")
def node_quota(dev_cluster: DevCluster) -> Iterator[str]:
    """Each node's pods held to NODE_CPU cores for this module; the quota the cluster had
    (none, on the session's cluster) is put back after."""
    cg = CpuCgroups.detect()
    if cg is None or cg.problem():
        pytest.skip(f"no writable cgroup cpu controller for --node-cpu: {cg and cg.problem()}")
    nodes = json.loads(dev_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    before = {n["metadata"]["labels"].get(NODE_CPU_LABEL) for n in nodes}
    restore = ["--node-cpu", before.pop()] if len(before) == 1 and None not in before else []
    up = ["up", "--nodes", str(len(nodes))]  # the cluster's own count (a reused one too)
    cascade_dev(dev_cluster.state_dir, *up, "--node-cpu", NODE_CPU, "--timeout", "120")
    try:
        yield NODE_CPU
    finally:
        cascade_dev(dev_cluster.state_dir, *up, *restore, "--timeout", "120")


@pytest.fixture(scope="module")
def deployed(
    dev_cluster: DevCluster, node_quota: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Namespace]:
    with namespace_with_operator(dev_cluster, "cascade-itl", tmp_path_factory.mktemp("itl")) as ns:
        ns.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest()))
        wait_for("the worker ready", lambda: len(ns.ready_pods(MD)) == 1, timeout=300)
        wait_for("the gateway up", lambda: gateway_ready(ns), timeout=180)
        yield ns


def gateway_ready(ns: Namespace) -> bool:
    out = ns.kubectl("get", "deploy", f"{MD}-gateway", "-o", "json", check=False)
    return (
        bool(out) and int((json.loads(out).get("status") or {}).get("availableReplicas") or 0) > 0
    )


def completions(url: str) -> Request:
    """Streamed interactive completions through the gateway at `url` (one token a chunk)."""

    async def request(http: aiohttp.ClientSession, i: int, n: int) -> Arrivals:
        body = {
            "model": MD,
            "prompt": f"client {i} request {n}: the quick brown fox",
            "max_tokens": MAX_TOKENS,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
        }
        arrivals: Arrivals = []
        async with http.post(f"{url}/v1/completions", json=body) as resp:
            assert resp.status == 200, await resp.text()
            async for raw in resp.content:
                line = raw.decode().strip()
                if line.startswith("data: {") and '"error"' not in line:
                    arrivals.append((time.monotonic(), 1))
        return arrivals

    return request


def test_an_itl_slo_violation_lowers_max_batch_until_the_slo_holds(
    dev_cluster: DevCluster, deployed: Namespace
) -> None:
    ns = deployed
    url = dev_cluster.url(f"{ns.ns}/{MD}-gateway")
    pod = ns.ready_pods(MD)[0]
    worker = f"http://{pod['status']['podIP']}:{WORKER_PORT}"
    started = time.monotonic()
    load = drive(
        completions(url), worker, clients=CLIENTS, run_s=RUN_S, poll_s=POLL_S,
        headers=auth_headers(worker),
    )  # fmt: skip
    done, polls, first = asyncio.run(load)
    heading = (
        f"SLO {SLO_MS:.0f} ms, engine max batch {MAX_BATCH}, {CLIENTS} clients through "
        f"the gateway, node CPU {NODE_CPU}"
    )
    timeline(heading, done, polls, RUN_S, SLO_MS)
    assert (first["max_batch"], first["engine_max_batch"]) == (MAX_BATCH, MAX_BATCH)

    assert_slo_broken_at_first(polls, done, SLO_MS, MAX_BATCH, "CASCADE_TEST_CLUSTER_ITL_SLO_MS")
    got = summarize(done, polls, RUN_S, SLO_MS, MAX_BATCH)
    print(f"{got.line(MAX_BATCH)}; load {time.monotonic() - started:.0f}s")
    assert got.cap_min < MAX_BATCH
    assert got.last_caps[1] < MAX_BATCH
    assert got.late is not None and got.window is not None
    assert got.window <= SLO_MS / 1000  # what the autoscaler steers by
    assert got.late <= SLO_MS / 1000  # and what the clients saw through the gateway
