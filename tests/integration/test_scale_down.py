"""Issue 10 §5 on the local cluster: scale-down without losing requests.

A ModelDeployment of 4 instances (no `maxReplicas`: `kubectl scale` owns the count)
serves STREAMS greedy streaming requests through its gateway, each long enough to
outlast a leaving worker's drain grace (--request-drain-seconds, 20 s, after the 2 s
readiness grace). While they run, `kubectl scale md --replicas 1`: the three deleted
workers hand back (FinishReason.MIGRATE) each stream as soon as it cannot finish in the
grace, and the gateway resumes it on the survivor, which prefills prompt + tokens so
far. Every accepted request must complete with finish_reason "length" and
MAX_TOKENS tokens, and each stream's text must equal the same request's output from
an uninterrupted run: the same requests again, afterwards, on the one instance left.
The test prints the migrations the gateway counted and the timings.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from integration_helpers import Namespace, namespace_with_operator

from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MD = "shrink"
STREAMS = 120
MAX_TOKENS = 500
SCALE_AFTER_CHUNKS = 8  # every stream has had this many chunks when the scale-down starts


@dataclass
class Outcome:
    text: str = ""
    seen: int = 0  # content chunks (a token each; a token whose text is held back sends none)
    finish: str | None = None
    usage: int = 0
    error: str = ""
    last_at: float = 0.0  # when the latest chunk came
    longest_gap: float = 0.0  # between two chunks: a move shows as one pause
    chunks: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def four(dev_cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Namespace]:
    with namespace_with_operator(
        dev_cluster, "cascade-shrink", tmp_path_factory.mktemp("shrink")
    ) as ns:
        ns.serve_model(MD, 4, timeout=300)
        yield ns


def gateway_load(url: str) -> dict[str, object]:
    with urllib.request.urlopen(f"{url}/v1/load", timeout=10) as resp:
        doc: dict[str, object] = json.loads(resp.read())
        return doc


def gateway_counter(url: str, name: str, label: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    pattern = rf"^{name}\{{[^}}]*{label}[^}}]*\}} ([0-9.e+]+)$"
    return sum(float(m.group(1)) for m in re.finditer(pattern, text, re.M))


def all_worker_pods(ns: Namespace) -> dict[str, bool]:
    """Worker pod name -> terminating, those being deleted included."""
    selector = f"cascade.dev/deployment={MD},app.kubernetes.io/component=worker"
    doc = json.loads(ns.kubectl("get", "pods", "-l", selector, "-o", "json"))
    return {
        p["metadata"]["name"]: bool(p["metadata"].get("deletionTimestamp")) for p in doc["items"]
    }


def gaps(outcomes: list[Outcome]) -> str:
    ordered = sorted(o.longest_gap for o in outcomes)
    return f"longest pause per stream p50 {ordered[len(ordered) // 2]:.1f}s max {ordered[-1]:.1f}s"


async def one(http: aiohttp.ClientSession, url: str, i: int, out: Outcome) -> None:
    body = {
        "model": MD,
        "prompt": f"Request {i}: a story about scaling down",
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    try:
        async with http.post(f"{url}/v1/completions", json=body) as resp:
            if resp.status != 200:
                out.error = f"HTTP {resp.status}: {await resp.text()}"
                return
            async for raw in resp.content:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[len("data: ") :])
                if "error" in event:
                    out.error = json.dumps(event["error"])
                    continue
                if event.get("usage"):
                    out.usage = event["usage"]["completion_tokens"]
                now = time.monotonic()
                if out.chunks:
                    out.longest_gap = max(out.longest_gap, now - out.last_at)
                out.last_at = now
                for choice in event.get("choices", []):
                    out.chunks.append(choice["text"])
                    out.seen += choice["finish_reason"] is None
                    out.finish = choice["finish_reason"] or out.finish
    except Exception as exc:
        out.error = repr(exc)
    out.text = "".join(out.chunks)


async def run_all(
    url: str, during: Callable[[list[Outcome]], Awaitable[None]] | None = None
) -> list[Outcome]:
    outcomes = [Outcome() for _ in range(STREAMS)]
    timeout = aiohttp.ClientTimeout(total=600)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
        tasks = [asyncio.create_task(one(http, url, i, o)) for i, o in enumerate(outcomes)]
        if during is not None:
            await during(outcomes)
        await asyncio.gather(*tasks)
    return outcomes


def test_scale_4_to_1_with_streams_in_flight_loses_none_and_changes_no_token(
    dev_cluster: DevCluster, four: Namespace
) -> None:
    ns = four
    url = dev_cluster.url(f"{ns.ns}/{MD}-gateway")
    wait_for(
        "the gateway routing to 4 backends",
        lambda: gateway_load(url).get("backends_ready") == 4,
        timeout=120,
    )
    timeline: list[str] = []
    t0 = time.monotonic()

    async def scale_down(outcomes: list[Outcome]) -> None:
        while min(o.seen for o in outcomes) < SCALE_AFTER_CHUNKS:
            await asyncio.sleep(0.1)
        done = sum(o.finish is not None for o in outcomes)
        at = time.monotonic() - t0
        each = sum(o.seen for o in outcomes) / STREAMS
        left = (MAX_TOKENS - each) / (each / at)  # at each stream's rate so far
        timeline.append(
            f"{at:6.1f}s scale 4 -> 1 ({done} done, {each:.0f} chunks per stream: "
            f"~{left:.0f}s of generation left each at {each / at:.1f} tokens/s)"
        )
        await asyncio.to_thread(ns.kubectl, "scale", "md", MD, "--replicas", "1")
        while any(o.finish is None and not o.error for o in outcomes):
            pods = await asyncio.to_thread(all_worker_pods, ns)
            done = sum(o.finish is not None for o in outcomes)
            timeline.append(
                f"{time.monotonic() - t0:6.1f}s pods={len(pods)} "
                f"(terminating {sum(p for p in pods.values())}) done={done}"
            )
            await asyncio.sleep(2.0)

    moved = asyncio.run(run_all(url, scale_down))
    elapsed = time.monotonic() - t0
    wait_for("one worker left", lambda: len(all_worker_pods(ns)) == 1, timeout=120)
    drained = gateway_counter(url, "cascade_gateway_migrations_total", 'reason="drain"')
    failed = gateway_counter(url, "cascade_gateway_migrations_total", 'reason="failure"')
    t1 = time.monotonic()
    reference = asyncio.run(run_all(url))
    print("\n".join(["timeline (scale 4 -> 1):", *timeline]))
    same = sum(m.text == r.text and not m.error for m, r in zip(moved, reference, strict=True))
    print(
        f"{STREAMS} streams x {MAX_TOKENS} tokens: {elapsed:.1f}s with the scale-down; "
        f"gateway migrations: {drained:.0f} handed back, {failed:.0f} after a broken stream; "
        f"reference run on 1 instance {time.monotonic() - t1:.1f}s; "
        f"{same}/{STREAMS} streams identical to it\n"
        f"  with the scale-down: {gaps(moved)}; reference: {gaps(reference)}"
    )
    errors = [(i, o.error) for i, o in enumerate(moved + reference) if o.error]
    assert errors == [], errors[:5]
    for outcomes in (moved, reference):
        assert all(o.finish == "length" and o.usage == MAX_TOKENS for o in outcomes), [
            (o.finish, o.usage) for o in outcomes if o.finish != "length" or o.usage != MAX_TOKENS
        ][:5]
    assert drained > 0  # streams did move
    assert same == STREAMS, [
        i for i, (m, r) in enumerate(zip(moved, reference, strict=True)) if m.text != r.text
    ]
