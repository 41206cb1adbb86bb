"""The probe beside the replay: every half second, each worker pod's GET /v1/status and
GET /metrics (in parallel, 1 s timeout each), the gateway's GET /v1/load and the
namespace's ScalePlans, as one `timeline.Round`. It runs on a thread (the autoscale
bench's loop: its own clock, the replay's origin), so blocking calls never stall the
replay's send times."""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cascade_api import constants as c
from cascade_bench.autoscale.cluster import COMPONENT, Bench, gateway_load
from cascade_bench.autoscale.loops import _Loop
from cascade_bench.autoscale.manifest import md_name
from cascade_bench.burst.timeline import Round, WorkerSample, parse_generated, plan_sample
from cascade_protocol.status import STATUS_PATH

TIMEOUT_S = 1.0


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
            return bytes(resp.read())
    except OSError:
        return None


def worker_pods(b: Bench, run: str) -> list[Any]:
    """The run's worker pods that exist (terminating ones included)."""
    sel = f"{c.LABEL_DEPLOYMENT}={md_name(run)},{COMPONENT}={c.COMPONENT_WORKER}"
    return list(b.core.list_namespaced_pod(b.ns, label_selector=sel).items)


class Probe(_Loop):
    period_s = 0.5

    def __init__(self, b: Bench, run: str, t0: float, gateway: str, period_s: float = 0.5) -> None:
        super().__init__(t0)
        self.b, self.run, self.gateway = b, run, gateway
        self.period_s = period_s
        self.wall0 = time.time() - (time.perf_counter() - t0)  # wall clock at t = 0
        self.rounds: list[Round] = []
        self.pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="probe")

    def _status(self, ip: str) -> tuple[float, Any]:
        """(when it answered, GET /v1/status's JSON or None)."""
        raw = _get(f"http://{ip}:{c.WORKER_PORT}{STATUS_PATH}")
        t = self.now()
        try:
            return t, json.loads(raw) if raw else None
        except ValueError:
            return t, None

    def _generated(self, ip: str) -> float | None:
        page = _get(f"http://{ip}:{c.WORKER_PORT}/metrics")
        return parse_generated(page.decode(errors="replace")) if page else None

    def step(self) -> None:
        t = self.now()
        pods = [
            (p.metadata.name, p.status.pod_ip)
            for p in worker_pods(self.b, self.run)
            if p.status.pod_ip and not p.metadata.deletion_timestamp
        ]
        statuses = [self.pool.submit(self._status, ip) for _, ip in pods]
        counters = [self.pool.submit(self._generated, ip) for _, ip in pods]
        load = gateway_load(self.gateway, timeout_s=TIMEOUT_S)
        plans = self.b.custom.list_namespaced_custom_object(
            c.GROUP, c.VERSION, self.b.ns, c.SP_PLURAL
        ).get("items", [])
        workers = tuple(
            WorkerSample.of(st.result()[0], name, st.result()[1], n.result())
            for (name, _), st, n in zip(pods, statuses, counters, strict=True)
        )
        self.rounds.append(
            Round(
                t=t,
                workers=workers,
                queued=None if load is None else sum(x.queued for x in load.classes.values()),
                in_flight=None if load is None else {x.pod: x.in_flight for x in load.backends},
                plans=tuple(plan_sample(p, self.wall0) for p in plans),
            )
        )

    def stop(self) -> None:
        super().stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
