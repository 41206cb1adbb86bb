"""The local autoscaler (Chiron Algorithm 1) in a real worker process brings ITL under its SLO.

No cluster: one `python -m cascade_worker.main` on loopback serving a checkpoint made by
`cascade model init --hidden 1024` (4 layers, float16, the engine on CPU with one torch
thread: OMP_NUM_THREADS=1, so a neighbour busy on the other core does not stall every
step's parallel region), with `--max-batch 32 --adaptive-batch on
--interactive-itl-slo-ms 60`. Forty closed-loop clients stream interactive requests (32
greedy tokens each) for 30 s, so the batch is always full and requests wait; a poller
reads `/v1/load` every 0.5 s. The test prints a timeline (pytest -s) and asserts that
the cap fell from the engine's 32 and that ITL over the last third of the run is within
the SLO: the autoscaler's own window ITL (p50), and the clients' (p50, within 10 %).

The SLO comes from the worker's window ITL measured on this 2-core machine with the same
model, flags and N closed-loop clients (adaptive batch on with a 10 s SLO, so the cap
stayed at 32): batch 1: 14 ms, 4: 34 ms, 8: 42 ms, 12: 51 ms, 16: 60 ms, 32: 75-100 ms.
60 ms was broken by ~1.4x at the engine's max batch then; on 2026-11-25 the same
machine ran batch 32 at 57-68 ms and the precondition failed at 60 (first window 57.7
ms), so the default is 50 ms (passed three times that day, the cap settling at 12 with a
window ITL of ~38 ms), still far above batch 1: the cap has room to settle without being
pinned at 1. A much faster machine may meet it at batch 32 already: set
CASCADE_TEST_ITL_SLO_MS lower there (the test says so when that happens).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from itl_load import Arrivals, Request, assert_slo_broken_at_first, drive, summarize, timeline

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

BIN = Path(sys.executable).parent
MAX_BATCH = 32
SLO_MS = float(os.environ.get("CASCADE_TEST_ITL_SLO_MS", "50"))
CLIENTS = 40
MAX_TOKENS = 32
RUN_S = 30.0
POLL_S = 0.5
PROMPT = "the quick brown fox jumps over the lazy dog"


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[str]:
    model = tmp_path / "model"
    subprocess.run(
        [str(BIN / "cascade"), "model", "init", str(model), "--hidden", "1024"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    log = tmp_path / "worker.log"
    env = {
        **os.environ,
        "POD_IP": "127.0.0.1",
        "POD_NAME": "las-w-0",
        "CASCADE_MODEL_PATH": str(model),
        "CASCADE_MODEL_URI": f"file://{model}",
        "CASCADE_LOG_LEVEL": "INFO",
        "OMP_NUM_THREADS": "1",
    }
    argv = [
        sys.executable, "-m", "cascade_worker.main", "--port", "0", "--serve-on-start",
        "--max-batch", str(MAX_BATCH), "--adaptive-batch", "on",
        "--interactive-itl-slo-ms", str(int(SLO_MS)),
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        port = _wait_port(proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        changes = [line for line in log.read_text().splitlines() if "max batch" in line]
        print("\nworker log, cap changes:\n" + "\n".join(changes[:40]))


def _wait_port(proc: subprocess.Popen[bytes], log: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", log.read_text())
        if match:
            return int(match.group(1))
        assert proc.poll() is None, f"worker exited:\n{log.read_text()}"
        time.sleep(0.1)
    raise AssertionError(f"worker did not start:\n{log.read_text()}")


def generate(base: str) -> Request:
    """Streamed interactive requests to the worker's own /v1/generate (NDJSON chunks)."""

    async def request(http: aiohttp.ClientSession, i: int, n: int) -> Arrivals:
        body = {
            "request_id": f"c{i}-{n}",
            "prompt": PROMPT,
            "params": {"max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True},
        }
        arrivals: Arrivals = []
        async with http.post(f"{base}/v1/generate", json=body) as resp:
            assert resp.status == 200, await resp.text()
            async for line in resp.content:
                chunk: dict[str, Any] = json.loads(line)
                if chunk.get("token_ids"):
                    arrivals.append((time.monotonic(), len(chunk["token_ids"])))
        return arrivals

    return request


def test_local_autoscaler_lowers_the_cap_until_itl_meets_the_slo(worker: str) -> None:
    load = drive(generate(worker), worker, clients=CLIENTS, run_s=RUN_S, poll_s=POLL_S)
    done, polls, first = asyncio.run(load)
    heading = f"SLO {SLO_MS:.0f} ms, engine max batch {MAX_BATCH}, {CLIENTS} clients"
    timeline(heading, done, polls, RUN_S, SLO_MS)
    assert (first["max_batch"], first["engine_max_batch"]) == (MAX_BATCH, MAX_BATCH)
    assert first["backpressure"] is None  # nothing judged before the load

    assert_slo_broken_at_first(polls, done, SLO_MS, MAX_BATCH, "CASCADE_TEST_ITL_SLO_MS")
    got = summarize(done, polls, RUN_S, SLO_MS, MAX_BATCH)
    print(got.line(MAX_BATCH))
    assert got.cap_min < MAX_BATCH
    assert got.last_caps[1] < MAX_BATCH
    assert got.late is not None and got.window is not None
    assert got.window <= SLO_MS / 1000  # what the autoscaler steers by, within the SLO
    assert got.late <= SLO_MS / 1000 * 1.1  # and what clients saw, within 10 % of it
