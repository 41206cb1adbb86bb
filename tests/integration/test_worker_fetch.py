"""Issue 3, acceptance 4: a worker pod told to fetch the model from another pod ends equal.

On the real local cluster: a tiny checkpoint made by `cascade model init`, the operator
running a two-replica ModelDeployment with its file:// URI (both pods load and serve it
at start), then over the workers' control API (pod IPs are reachable from the host)
pod 1 drains and fetches from pod 0's IP; it must reach phase ready with pod 0's digest
and block checksums, and once serving again generate pod 0's greedy tokens.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from integration_helpers import Namespace, generated, http, small_model

from cascade_api.constants import WORKER_PORT
from cascade_dev.testing import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
MD = "fetcher"


def test_pod_fetches_model_from_peer_pod(cluster: Namespace, tmp_path: Path) -> None:
    model = small_model()
    cluster.serve_model(MD, 2, model, 180)
    src, dst = cluster.ready_pods(MD)
    a = f"http://{src['status']['podIP']}:{WORKER_PORT}"
    b = f"http://{dst['status']['podIP']}:{WORKER_PORT}"
    # Both loaded the checkpoint at start and serve it. Pod 1 stops serving and drops
    # its copy for the one it fetches from pod 0. The operator serves a pod that holds
    # the whole model and runs no engine, so it may serve pod 1 again between the drain
    # and the fetch (a fetch then answers 409): drain and ask again until one is taken.
    assert http("GET", f"{a}/v1/status")[1]["engine"] == "serving"

    def drained_then_fetching() -> bool:
        status, doc = http("POST", f"{b}/v1/control/drain", {})
        assert status == 202, doc
        off = time.monotonic() + 5.0
        while http("GET", f"{b}/v1/status")[1]["engine"] != "off":
            if time.monotonic() > off:
                return False
            time.sleep(0.02)
        status, doc = http("POST", f"{b}/v1/control/fetch", {"peer": src["status"]["podIP"]})
        assert status in (202, 409), doc
        return status == 202

    wait_for("pod 1 drained and fetching", drained_then_fetching, timeout=120)
    wait_for(
        "pod 1 fetched",
        lambda: http("GET", f"{b}/v1/status")[1]["phase"] in ("ready", "failed"),
        timeout=120,
    )
    sa, sb = http("GET", f"{a}/v1/status")[1], http("GET", f"{b}/v1/status")[1]
    assert sb["phase"] == "ready", sb
    assert sb["modelDigest"] == sa["modelDigest"]
    assert sb["lastTransfer"]["missing"] == [] and sb["bytesReceived"] > 0
    ma, mb = http("GET", f"{a}/v1/control/manifest")[1], http("GET", f"{b}/v1/control/manifest")[1]
    assert [blk["checksum"] for blk in ma["blocks"]] == [blk["checksum"] for blk in mb["blocks"]]

    # The fetched copy serves: the same greedy tokens as the pod it came from. The
    # operator serves a pod that holds the whole model and runs no engine, so it may
    # have given the order first: its engine then serves already, or is still starting
    # (on half the CPU it was, 2026-12-02).
    status, doc = http("POST", f"{b}/v1/control/serve", {})
    raced = ("serves already", "an engine is starting already")
    assert status == 202 or (status == 409 and any(r in doc["error"] for r in raced)), doc
    wait_for("pod 1 serving", lambda: http("GET", f"{b}/v1/status")[1]["engine"] == "serving")
    ask = {"request_id": "r", "prompt": "Hello", "params": {"max_tokens": 12, "temperature": 0}}
    assert generated(f"{a}/v1/generate", ask) == generated(f"{b}/v1/generate", ask)
