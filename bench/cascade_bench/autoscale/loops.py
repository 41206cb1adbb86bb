"""The two loops that run beside a replay, each on its own thread.

The replay is an asyncio loop whose send times and token times are the measurement;
blocking Kubernetes and HTTP calls must not stall it, so these loops run on threads
with their own clocks (the same `perf_counter` origin as the replay, passed in).

- `Sampler`: once a second, the run's worker pods (existing, Ready, starting,
  terminating) and `spec.replicas`; remembers when each pod (by uid) was first seen;
  with the gateway's URL, also its `/v1/load` (queues, per-backend caps and batches).
- `KpaLoop`: every 2 s, the gateway's `/v1/load` -> `kpa.decide` -> a `/scale` write
  when the count changes. Its decisions are kept for the report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cascade_bench.autoscale import kpa
from cascade_bench.autoscale.cluster import Bench, concurrency, gateway_load
from cascade_bench.autoscale.timeline import Sample, serving_view


class _Loop:
    period_s = 1.0

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.stop_event = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True, name=type(self).__name__)

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def step(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        next_at = self.now()
        while not self.stop_event.is_set():
            try:
                self.step()
            except Exception as exc:  # a failed reading must not end the loop
                if len(self.errors) < 20:
                    self.errors.append(f"{self.now():.1f} s: {type(exc).__name__}: {exc}"[:300])
            next_at += self.period_s
            self.stop_event.wait(max(0.0, next_at - self.now()))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)


class Sampler(_Loop):
    period_s = 1.0

    def __init__(
        self,
        bench: Bench,
        run: str,
        t0: float,
        url: str | None = None,
        load_of: Callable[[str], Any] = gateway_load,
    ) -> None:
        super().__init__(t0)
        self.bench, self.run, self.url, self.load_of = bench, run, url, load_of
        self.samples: list[Sample] = []
        self.first_seen: dict[str, float] = {}  # pod uid -> first sample time
        self.nodes: dict[str, str] = {}  # pod uid -> node

    def step(self) -> None:
        t = self.now()
        s, nodes = self.bench.sample(self.run, t)
        load = self.load_of(self.url) if self.url else None
        if load is not None:
            s = replace(s, serving=serving_view(load))
        self.samples.append(s)
        for uid, node in nodes.items():
            self.first_seen.setdefault(uid, t)
            if node:
                self.nodes[uid] = node


class KpaLoop(_Loop):
    period_s = 2.0

    def __init__(
        self,
        bench: Bench,
        run: str,
        url: str,
        cfg: kpa.KpaConfig,
        t0: float,
        load_of: Callable[[str], Any] = gateway_load,
    ) -> None:
        super().__init__(t0)
        self.bench, self.run, self.url, self.cfg = bench, run, url, cfg
        self.state = kpa.KpaState()
        self.load_of = load_of
        self.decisions: list[dict[str, Any]] = []  # writes only, and unanswered reads

    def step(self) -> None:
        t = self.now()
        load = self.load_of(self.url)
        if load is None:
            self.decisions.append({"t": round(t, 3), "error": "no load report"})
            return
        current = self.bench.replicas(self.run)
        n = concurrency(load)
        d, self.state = kpa.decide(self.cfg, self.state, t, n, current)
        if d.write:
            self.bench.scale(self.run, d.replicas)
            self.decisions.append(
                {
                    "t": round(t, 3),
                    "concurrency": n,
                    "from": current,
                    "to": d.replicas,
                    "reason": d.reason,
                }
            )
