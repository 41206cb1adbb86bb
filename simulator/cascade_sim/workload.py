"""Requests in, and how hard a workload is for a given instance.

An `Arrival` is what the trace says (after the bench's windowing and token scaling:
the CLI builds them with `cascade_bench.replay.scale.schedule`, so a simulation and a
cluster replay with the same flags send the same requests). A `Req` is the simulator's
record of one request: filled in as it is queued, dispatched, prefilled and decoded.

Two ways to make a trace heavier, both deterministic:

- `compress` (the replay's `--speedup`): arrival times / s. Same requests, shorter run;
  the trace's total work is unchanged, so a short trace cannot keep many instances busy
  for long (the 57-minute Azure code trace holds about 35 instance-minutes of work for
  the 0.5-core tiny-llama profile).
- `replicate` (`--rate-scale K`): each request arrives K times on average (floor(K) or
  ceil(K) copies, chosen by a seeded hash), copies within `spread_s` after the original
  at hash-chosen offsets, each copy's class drawn again with the same batch share. Rates
  scale by K while the trace's shape over minutes and its length stay.

`peak_demand` says how many instances the busiest minute keeps busy: a request costs an
instance `prompt / prefill rate + output / tokens_per_s(b)` seconds, with b the largest
batch whose step time meets the interactive ITL SLO (the batch an SLO-respecting engine
runs at), and a minute's demand is its requests' cost over 60 s. Demand grows linearly
with K, so `--peak-instances N` is K = N / peak demand at K = 1.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from cascade_autoscaler.batch_queue import QueuedBatchRequest
from cascade_sim.profile import CapacityProfile


@dataclass(frozen=True)
class Arrival:
    index: int  # trace row: identity across windows and runs
    at_s: float  # arrival, seconds after the simulation starts
    prompt_tokens: int  # >= 1
    output_tokens: int  # >= 1: max_tokens with ignore_eos, as the replay sends it
    batch: bool  # request class: batch (True) or interactive


NAN = math.nan


class Req:
    """One request's life in the simulator; times are NaN until they happen."""

    __slots__ = (
        "arrival",
        "batch",
        "dispatched",
        "finished",
        "first",
        "index",
        "instance",
        "left",
        "output",
        "preempted",
        "prompt",
        "queued",
        "rejected",
        "remaining",
        "timed_out",
    )

    def __init__(self, a: Arrival, batch_ttft_s: float) -> None:
        self.index = a.index
        self.arrival = a.at_s
        self.prompt = a.prompt_tokens
        self.output = a.output_tokens
        self.batch = a.batch
        self.dispatched = NAN
        self.first = NAN  # first token (end of prefill)
        self.finished = NAN
        self.instance = -1
        self.rejected = False  # the gateway's class queue was full (429)
        self.timed_out = False  # still queued after the client's timeout
        self.remaining = 0.0  # prompt tokens left to prefill
        self.left = -1.0  # decode tokens left when preempted (recomputed, then resumed)
        self.preempted = 0  # times an interactive request took its place (batch only)
        # What Algorithm 2 sees of it while it waits (built once, not every tick).
        self.queued = (
            QueuedBatchRequest.with_slo(a.at_s, batch_ttft_s, a.prompt_tokens, a.output_tokens)
            if a.batch
            else None
        )

    @property
    def ttft_s(self) -> float:
        return self.first - self.arrival

    @property
    def mean_itl_s(self) -> float | None:
        """(last token - first token) / (tokens - 1), as the replay metrics define it."""
        if self.output < 2 or math.isnan(self.finished):
            return None
        return (self.finished - self.first) / (self.output - 1)


def request_cost_s(a: Arrival, profile: CapacityProfile, batch: int, prefill_rate: float) -> float:
    """Instance-seconds one request takes at the operating batch."""
    return a.prompt_tokens / prefill_rate + a.output_tokens / profile.tokens_per_s(batch)


def peak_demand(
    arrivals: Sequence[Arrival],
    profile: CapacityProfile,
    batch: int,
    prefill_rate: float,
    bin_s: float = 60.0,
) -> float:
    """Instances the busiest `bin_s` window (fixed bins from t = 0) keeps busy."""
    load: dict[int, float] = {}
    for a in arrivals:
        key = math.floor(a.at_s / bin_s)
        load[key] = load.get(key, 0.0) + request_cost_s(a, profile, batch, prefill_rate)
    return max(load.values(), default=0.0) / bin_s


def rate_scale_for_peak(
    arrivals: Sequence[Arrival],
    instances: float,
    profile: CapacityProfile,
    batch: int,
    prefill_rate: float,
) -> float:
    """The `replicate` factor K whose busiest minute needs about `instances`."""
    if instances <= 0:
        raise ValueError("peak instances must be > 0")
    peak = peak_demand(arrivals, profile, batch, prefill_rate)
    if peak <= 0:
        raise ValueError("the window has no requests to scale")
    return instances / peak


def speedup_for_peak(
    arrivals: Sequence[Arrival],
    instances: float,
    profile: CapacityProfile,
    batch: int,
    prefill_rate: float,
    rounds: int = 8,
) -> float:
    """The `compress` factor s whose busiest minute needs about `instances`.

    Compressing also moves requests between minute bins, so s is refined a few times;
    when even the whole window in one minute cannot keep `instances` busy, it says so.
    """
    if instances <= 0:
        raise ValueError("peak instances must be > 0")
    s, peak = 1.0, 0.0
    for _ in range(rounds):
        peak = peak_demand([compress(a, s) for a in arrivals], profile, batch, prefill_rate)
        if peak <= 0:
            raise ValueError("the window has no requests to scale")
        s *= instances / peak
    total = sum(request_cost_s(a, profile, batch, prefill_rate) for a in arrivals) / 60.0
    if abs(peak - instances) > 0.1 * instances:
        raise ValueError(
            f"compressing time cannot make the busiest minute need {instances:g} instances: "
            f"the window holds {total:.1f} instance-minutes of work; use --rate-scale"
        )
    return s


def compress(a: Arrival, speedup: float) -> Arrival:
    return Arrival(a.index, a.at_s / speedup, a.prompt_tokens, a.output_tokens, a.batch)


def _unit(*key: object) -> float:
    """A seeded hash of `key`, uniform in [0, 1)."""
    digest = hashlib.blake2b(":".join(map(str, key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def replicate(
    arrivals: Sequence[Arrival],
    k: float,
    seed: int = 0,
    batch_fraction: float | None = None,
    spread_s: float = 1.0,
) -> list[Arrival]:
    """Each request K times on average (see the module docstring), sorted by arrival.

    Copy 0 is the original; copy j > 0 arrives `spread_s` x a hash later and is batch
    with probability `batch_fraction` (None: the original's class).
    """
    if k <= 0:
        raise ValueError("rate scale must be > 0")
    out: list[Arrival] = []
    whole = math.floor(k)
    for a in arrivals:
        copies = whole + (1 if _unit(seed, "n", a.index) < k - whole else 0)
        for j in range(copies):
            if j == 0:
                out.append(a)
                continue
            at = a.at_s + spread_s * _unit(seed, "t", a.index, j)
            batch = a.batch
            if batch_fraction is not None:
                batch = _unit(seed, "c", a.index, j) < batch_fraction
            out.append(Arrival(a.index, at, a.prompt_tokens, a.output_tokens, batch))
    out.sort(key=lambda a: a.at_s)
    return out
