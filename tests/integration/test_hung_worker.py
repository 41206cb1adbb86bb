"""A worker that hangs mid-stream does not hold its requests (issue 34 item 4).

SmolLM2-135M-Instruct behind a three-replica ModelDeployment, the gateway at its
defaults (stall bound 5 s). Six greedy streams run at once; once each has tokens, the
worker holding the most of them is SIGSTOPped (its kernel keeps ACKing, so no TCP
timeout fires: before the stall watch its requests waited as long as it was stopped)
and kept stopped for 40 s. Every stream finishes while it is still stopped, and every
text equals the uninterrupted run's. No stream waits between two tokens longer than the
stall watch takes to cut (the bound, plus the time between two looks) plus a resume:
a fresh prefill on a busy worker, allowed three times the slowest first token of the
uninterrupted run beside it (at least 3 s), so a slow shared machine slows both alike.
After SIGCONT the worker serves again.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest
from integration_helpers import Namespace, container_pid, process_tree, real_model_served
from real_model import PROMPTS

from cascade_dev.testing import DevCluster, wait_for
from cascade_gateway.backends import STALL_CHECKS_PER_BOUND
from cascade_gateway.config import DEFAULT_STALL_SECONDS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

MD = "hang"
REPLICAS = 3
STREAMS = 6
MAX_TOKENS = 48
STALL_S = DEFAULT_STALL_SECONDS  # the gateway runs at its defaults
CUT_S = STALL_S * (1 + 1 / STALL_CHECKS_PER_BOUND)  # the bound plus one look
RESUME_FLOOR_S = 3.0
STOPPED_S = 40.0


@pytest.fixture(scope="module")
def served(
    dev_cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Namespace, str]]:
    log_dir = tmp_path_factory.mktemp("hung")
    with real_model_served(dev_cluster, MD, REPLICAS, log_dir, timeout=400) as served:
        yield served


def stream(url: str, prompt: str, started: list[float]) -> tuple[str, list[float]]:
    """The text of one greedy stream and the times it was sent (first) and its tokens
    came."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=120)
    body: dict[str, Any] = {"ignore_eos": True}
    sent_at = time.monotonic()
    chunks = client.completions.create(
        model=MD, prompt=prompt, stream=True, max_tokens=MAX_TOKENS, temperature=0,
        extra_body=body,
    )  # fmt: skip
    text, times = "", [sent_at]
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].text:
            text += chunk.choices[0].text
            times.append(time.monotonic())
            if len(times) == 2:
                started.append(times[1])
    return text, times


def gateway_in_flight(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/v1/load", timeout=10) as resp:
        load = json.loads(resp.read())
    return {b["pod"]: b["in_flight"] for b in load["backends"]}


def signal_pod(ns: Namespace, pod: str, sig: signal.Signals) -> None:
    doc = json.loads(ns.kubectl("get", "pod", pod, "-o", "json"))
    for pid in process_tree(container_pid(doc)):
        os.kill(pid, sig)


def test_streams_on_a_stopped_worker_finish_elsewhere_with_unchanged_outputs(
    served: tuple[Namespace, str],
) -> None:
    ns, url = served
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(STREAMS)]
    with ThreadPoolExecutor(STREAMS) as pool:
        uninterrupted = list(pool.map(lambda p: stream(url, p, []), prompts))
        reference = [t for t, _ in uninterrupted]
        resume_s = max(RESUME_FLOOR_S, 3 * max(ts[1] - ts[0] for _, ts in uninterrupted))
        started: list[float] = []
        futures = [pool.submit(stream, url, p, started) for p in prompts]
        wait_for("every stream has a token", lambda: len(started) == STREAMS, timeout=60)
        in_flight = gateway_in_flight(url)
        victim = max(in_flight, key=lambda pod: in_flight[pod])
        signal_pod(ns, victim, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            results = [f.result(timeout=STOPPED_S) for f in futures]
            done_at = time.monotonic()
        finally:
            signal_pod(ns, victim, signal.SIGCONT)
    gaps = [max(b - a for a, b in itertools.pairwise(ts[1:])) for _, ts in results]
    print(
        f"stopped {victim} ({in_flight[victim]} of {STREAMS} streams on it); all done "
        f"{done_at - stopped_at:.1f} s after the stop; longest gap between two tokens "
        f"per stream {sorted(round(g, 1) for g in gaps)} s; allowed {CUT_S:.1f} s to cut "
        f"+ {resume_s:.1f} s to resume"
    )
    assert [t for t, _ in results] == reference
    assert max(gaps) <= CUT_S + resume_s
    ns.wait_ready(MD, REPLICAS, 60, "the worker serves again")
