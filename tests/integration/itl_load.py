"""Closed-loop streaming load on one worker whose local autoscaler steers its max batch by
an ITL SLO; shared by test_local_autoscaler.py (a worker process on loopback, its own
/v1/generate) and test_itl_slo_cluster.py (a worker on the dev cluster, through the
gateway's /v1/completions).

`drive` runs `clients` closed-loop clients for `run_s` seconds (each makes one streamed
request after another with the test's `Request`) and a poller of the worker's GET
/v1/load every `poll_s`; it returns what finished (`Done`), what was polled (`Poll`) and
the load document before the load. `timeline` prints both per second (pytest -s) and
`summarize` gives the figures the tests assert on: the cap over the run and its last
third, client ITL at the engine's max batch and over the last third, and the worker's
own window ITL (LBP x SLO) over the last third.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

# One streamed request's chunks as they arrived: (monotonic time, tokens in the chunk).
Arrivals = list[tuple[float, int]]
# Request n of client i: streams it to the end and returns its arrivals.
Request = Callable[[aiohttp.ClientSession, int, int], Awaitable[Arrivals]]


@dataclass(frozen=True)
class Done:
    at: float  # seconds since the load began, when the request finished
    itl_s: float  # its mean decode ITL as the client saw it: (last - first) / tokens after


@dataclass(frozen=True)
class Poll:
    at: float
    max_batch: int
    running: int
    waiting: int
    lbp: float | None  # the last judged window's; None before one
    tbp: float | None
    backpressure: float | None


@dataclass(frozen=True)
class Summary:
    cap_min: int
    last_caps: tuple[int, int]  # the cap's range over the last third of the run
    early: float | None  # client ITL p50 of the first max-batch requests (s)
    late: float | None  # client ITL p50 over the last third (s)
    late_n: int
    window: float | None  # the worker's window ITL p50 over the last third (s)
    requests: int

    def line(self, max_batch: int) -> str:
        return (
            f"max batch: min {self.cap_min}, last third {self.last_caps[0]}-"
            f"{self.last_caps[1]}; client ITL p50: first {max_batch} requests (at the "
            f"engine's max batch) {ms(self.early)} ms, last third {ms(self.late)} ms "
            f"({self.late_n} requests); worker window ITL p50, last third "
            f"{ms(self.window)} ms; {self.requests} requests in all"
        )


async def _client(
    http: aiohttp.ClientSession, request: Request, i: int, t0: float, stop: float, out: list[Done]
) -> None:
    n = 0
    while time.monotonic() < stop:
        n += 1
        arrivals = await request(http, i, n)
        if len(arrivals) > 1:
            after = sum(k for _, k in arrivals[1:])
            out.append(Done(arrivals[-1][0] - t0, (arrivals[-1][0] - arrivals[0][0]) / after))


async def _poll(
    http: aiohttp.ClientSession, worker: str, poll_s: float, t0: float, stop: float, out: list[Poll]
) -> None:
    while time.monotonic() < stop:
        await asyncio.sleep(poll_s)
        async with http.get(f"{worker}/v1/load") as resp:
            doc = await resp.json()
        now = time.monotonic() - t0
        bps = doc["latency_backpressure"], doc["throughput_backpressure"], doc["backpressure"]
        out.append(Poll(now, doc["max_batch"], doc["running"], doc["waiting"], *bps))


async def _ready(http: aiohttp.ClientSession, worker: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        async with http.get(f"{worker}/readyz") as resp:
            if resp.status == 200:
                return
        await asyncio.sleep(0.2)
    raise AssertionError("worker never served")


async def drive(
    request: Request,
    worker: str,
    *,
    clients: int,
    run_s: float,
    poll_s: float,
    headers: dict[str, str] | None = None,
) -> tuple[list[Done], list[Poll], dict[str, Any]]:
    """The load, once `worker` (its base URL) is ready; (done, polls, /v1/load before).
    `headers`: on every request (a cluster worker's peer token for its /v1/load)."""
    done: list[Done] = []
    polls: list[Poll] = []
    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector, headers=headers) as http:
        await _ready(http, worker)
        async with http.get(f"{worker}/v1/load") as resp:
            first = await resp.json()
        t0 = time.monotonic()
        stop = t0 + run_s
        load = [_client(http, request, i, t0, stop, done) for i in range(clients)]
        await asyncio.gather(_poll(http, worker, poll_s, t0, stop, polls), *load)
    return done, polls, first


def p50(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def timeline(
    heading: str, done: list[Done], polls: list[Poll], run_s: float, slo_ms: float
) -> None:
    """Per second of the load: the last poll in it and the client ITL p50 of what ended."""
    print(f"\n{heading}")
    print("   t  max_batch  running  waiting   LBP   TBP  client ITL p50 ms  window ITL ms")
    for k in range(int(run_s)):
        lo, hi = float(k), float(k + 1)
        inside = [p for p in polls if lo <= p.at < hi]
        if not inside:
            continue
        p = inside[-1]
        itl = p50([d.itl_s for d in done if lo <= d.at < hi])
        window = p.lbp * slo_ms / 1000 if p.lbp is not None else None
        print(
            f"{hi:4.0f}  {p.max_batch:9d}  {p.running:7d}  {p.waiting:7d}  {_f(p.lbp):>4}  "
            f"{_f(p.tbp):>4}  {ms(itl):>17}  {ms(window):>13}"
        )


def assert_slo_broken_at_first(
    polls: list[Poll], done: list[Done], slo_ms: float, max_batch: int, env: str
) -> None:
    """The load breaks the SLO at the engine's max batch: the first judged window does,
    or the clients' ITL p50 over the first `max_batch` requests does (the first window
    may close before the batch is full). If neither, this machine is too fast for the
    SLO and `env` sets a lower one."""
    judged = [p.lbp for p in polls if p.lbp is not None]
    assert judged, "the local autoscaler judged no window"
    early = p50([d.itl_s for d in sorted(done, key=lambda d: d.at)[:max_batch]])
    window_ms, early_ms = judged[0] * slo_ms, 1000 * (early or 0.0)
    assert max(window_ms, early_ms) >= slo_ms, (
        f"ITL at the engine's max batch (first window {window_ms:.1f} ms, clients "
        f"{early_ms:.1f} ms) meets the {slo_ms:.0f} ms SLO already on this machine: "
        f"set {env} lower"
    )


def summarize(
    done: list[Done], polls: list[Poll], run_s: float, slo_ms: float, max_batch: int
) -> Summary:
    last = [p for p in polls if p.at >= run_s * 2 / 3]
    late_itls = [d.itl_s for d in done if d.at >= run_s * 2 / 3]
    return Summary(
        cap_min=min(p.max_batch for p in polls),
        last_caps=(min(p.max_batch for p in last), max(p.max_batch for p in last)),
        early=p50([d.itl_s for d in sorted(done, key=lambda d: d.at)[:max_batch]]),
        late=p50(late_itls),
        late_n=len(late_itls),
        window=p50([p.lbp * slo_ms / 1000 for p in last if p.lbp is not None]),
        requests=len(done),
    )


# The SLO a test steers by is measured in the same run, not fixed: a fixed one holds on
# one machine's speed only (a 50 ms SLO met at the engine's max batch on a faster day).
CAL_SLO_MS = 10_000  # the calibration's SLO: so loose that the cap stays at max batch
SLO_AT = 0.5  # the SLO: this far from the batch-1 ITL to the max-batch ITL
MIN_SPREAD = 1.3  # max-batch ITL / batch-1 ITL below which no SLO lies between them


def slo_between(batch1_s: float, full_s: float, max_batch: int) -> int:
    """The SLO (whole ms, as the API takes it) SLO_AT of the way from the batch-1 ITL to
    the max-batch ITL; fails when the engine's ITL hardly grows with the batch."""
    assert full_s >= MIN_SPREAD * batch1_s, (
        f"ITL at max batch {max_batch} ({full_s * 1000:.1f} ms) is under {MIN_SPREAD}x "
        f"ITL at batch 1 ({batch1_s * 1000:.1f} ms): no ITL SLO between them to steer by"
    )
    return max(1, round(1000 * (batch1_s + SLO_AT * (full_s - batch1_s))))


@dataclass(frozen=True)
class Calibration:
    """ITL p50s under the loose CAL_SLO_MS, as the clients and the worker's window saw them."""

    full_client: float
    full_window: float
    one_client: float
    one_window: float
    max_batch: int

    @property
    def slo_ms(self) -> int:
        # Under the lower max-batch view and above the higher batch-1 view.
        full = min(self.full_client, self.full_window)
        return slo_between(max(self.one_client, self.one_window), full, self.max_batch)

    def chosen_slo_ms(self, env: str) -> int:
        """The measured SLO, or `env`'s where set; printed either way (pytest -s)."""
        override = os.environ.get(env)
        chosen = round(float(override)) if override else self.slo_ms
        print("\n" + self.line() + (f"; {env} sets {chosen} ms" if override else ""))
        return chosen

    def line(self) -> str:
        return (
            f"calibration (SLO {CAL_SLO_MS} ms): ITL p50 at max batch {self.max_batch}: "
            f"clients {ms(self.full_client)} ms, window {ms(self.full_window)} ms; at batch "
            f"1: clients {ms(self.one_client)} ms, window {ms(self.one_window)} ms "
            f"-> SLO {self.slo_ms} ms"
        )


def _calibration_load(
    request: Request, worker: str, clients: int, run_s: float, poll_s: float,
    max_batch: int, headers: dict[str, str] | None,
) -> tuple[float, float]:  # fmt: skip
    """(client ITL p50, window ITL p50) of one load under CAL_SLO_MS; the window's is
    LBP x that SLO (the clients' when no window was judged). The cap must not move."""
    load = drive(request, worker, clients=clients, run_s=run_s, poll_s=poll_s, headers=headers)
    done, polls, _ = asyncio.run(load)
    assert done and polls, f"calibration with {clients} clients: {len(done)} requests"
    assert min(p.max_batch for p in polls) == max_batch, "the cap moved under the loose SLO"
    client = p50([d.itl_s for d in done])
    window = p50([p.lbp * CAL_SLO_MS / 1000 for p in polls if p.lbp is not None])
    assert client is not None
    return client, window if window is not None else client


def calibrate(
    request: Request, worker: str, *, clients: int, run_s: float, poll_s: float,
    max_batch: int, headers: dict[str, str] | None = None,
) -> Calibration:  # fmt: skip
    """ITL at the engine's max batch (`clients` closed-loop clients) and at batch 1, on a
    worker running with CAL_SLO_MS."""
    args = (worker, clients, run_s, poll_s, max_batch, headers)
    full = _calibration_load(request, *args)
    one = _calibration_load(request, worker, 1, run_s, poll_s, max_batch, headers)
    return Calibration(*full, *one, max_batch=max_batch)
