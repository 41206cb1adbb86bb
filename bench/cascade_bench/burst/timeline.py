"""What the probe saw every half second, and the timeline and events drawn from it.

Clock: seconds since the replay started (the requests' records use the same origin,
within a few ms). A `Round` is one sampling pass: each worker's GET /v1/status and its
`cascade_worker_generated_tokens_total` (GET /metrics), the gateway's queue and per-pod
in-flight counts (GET /v1/load), and the namespace's ScalePlans (start and completion
times are the API's whole seconds, moved onto this clock through the wall clock at t0).

From the rounds and the records (pure):

- `client_series`: per second, output tokens the clients received (a chunk carrying n
  tokens counts n) and the queue: requests sent and still without their first token;
- `worker_series`: per round, the workers' own waiting and running counts, the gateway's
  queue, the pods heading a pipeline and the pods serving as stages;
- `first_new_token`: the first round after the scale decision in which a pod that did
  not exist before it (new capacity, or a pipeline headed by one) has generated a token
  (its counter > 0): the time it answered; the token came after its previous answer.
  Without counters (metrics unreadable) the status rule stands in: mode head or local
  with requests running (`first_new_serving` reports that rule always);
- `weights_window`: from the first round a new pod loads or receives weights to the
  first one in which every new pod holds the whole model; `plan_window`: the ScalePlans'
  startTime to their last completionTime.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cascade_bench.replay.record import RequestRecord

SERVING_MODES = ("head", "local")
GENERATED = "cascade_worker_generated_tokens_total"


@dataclass(frozen=True)
class WorkerSample:
    t: float  # when its status answer arrived
    pod: str
    mode: str = ""  # ServingMode; "" when the status was not read
    phase: str = ""  # WorkerPhase
    blocks_loaded: int = 0
    blocks_total: int = 0
    running: int = 0
    waiting: int = 0
    head: bool = False  # its engine heads an execution pipeline
    stage: tuple[int, int] | None = None  # the layers it serves as a stage
    generated: float | None = None  # tokens generated so far (None: metrics unread)

    @classmethod
    def of(
        cls, t: float, pod: str, status: Mapping[str, Any] | None, generated: float | None
    ) -> WorkerSample:
        """From GET /v1/status's JSON (camelCase) and the counter."""
        s = status or {}
        stage = (s.get("stage") or {}).get("layers")
        return cls(
            t=t,
            pod=pod,
            mode=str(s.get("mode", "")),
            phase=str(s.get("phase", "")),
            blocks_loaded=int(s.get("blocksLoaded", 0)),
            blocks_total=int(s.get("blocksTotal", 0)),
            running=int(s.get("running", 0)),
            waiting=int(s.get("waiting", 0)),
            head=s.get("pipeline") is not None,
            stage=None if stage is None else (int(stage[0]), int(stage[1])),
            generated=generated,
        )

    @property
    def holds_model(self) -> bool:
        return self.blocks_total > 0 and self.blocks_loaded >= self.blocks_total

    def to_json(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 3),
            "pod": self.pod,
            "mode": self.mode,
            "phase": self.phase,
            "blocks": [self.blocks_loaded, self.blocks_total],
            "running": self.running,
            "waiting": self.waiting,
            "head": self.head,
            "stage": None if self.stage is None else list(self.stage),
            "generated": self.generated,
        }


@dataclass(frozen=True)
class Round:
    t: float  # when the pass began
    workers: tuple[WorkerSample, ...] = ()
    queued: int | None = None  # the gateway's queued requests, all classes (None: unread)
    in_flight: Mapping[str, int] | None = None  # the gateway's in-flight requests per pod
    plans: tuple[Mapping[str, Any], ...] = ()  # `plan_sample`s


def parse_generated(text: str) -> float | None:
    """The generated-tokens counter from a Prometheus text page (None: absent)."""
    for line in text.splitlines():
        if line.startswith(GENERATED + " ") or line.startswith(GENERATED + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def _clock(stamp: str | None, wall0: float) -> float | None:
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - wall0


def plan_sample(body: Mapping[str, Any], wall0: float) -> dict[str, Any]:
    """What the bench keeps of a ScalePlan, its times on the bench's clock (`wall0`: the
    wall-clock time of t = 0)."""
    spec, status = body.get("spec") or {}, body.get("status") or {}
    return {
        "name": body.get("metadata", {}).get("name", ""),
        "phase": status.get("phase", ""),
        "start_t": _clock(status.get("startTime"), wall0),
        "end_t": _clock(status.get("completionTime"), wall0),
        "targets": list(spec.get("targets") or []),
        "predicted_s": spec.get("predictedCompletionSeconds"),
        "measured_s": status.get("measuredCompletionSeconds"),
        "planned_pipelines": [
            {"head": (p.get("stages") or [{}])[0].get("pod"), "ready_s": p.get("readySeconds")}
            for p in spec.get("executionPipelines") or []
        ],
        "pipelines": list(status.get("pipelines") or []),
    }


def _new(samples: Iterable[WorkerSample], originals: set[str], after: float) -> list[WorkerSample]:
    out = [s for s in samples if s.pod not in originals and s.t >= after]
    return sorted(out, key=lambda s: s.t)


def _all(rounds: Sequence[Round]) -> list[WorkerSample]:
    return [w for r in rounds for w in r.workers]


def first_new_serving(
    rounds: Sequence[Round], originals: set[str], after: float
) -> tuple[float, str] | None:
    """(time, pod): the first answer of a new pod in mode head/local with requests running."""
    for s in _new(_all(rounds), originals, after):
        if s.mode in SERVING_MODES and s.running > 0:
            return s.t, s.pod
    return None


def first_new_token(
    rounds: Sequence[Round], originals: set[str], after: float
) -> dict[str, Any] | None:
    """The first token from new capacity: {t, pod, after_t (its previous answer: the
    token came in (after_t, t]), source: metrics | status}; None: none seen."""
    samples = _all(rounds)
    if any(s.generated is not None for s in samples if s.pod not in originals):
        last: dict[str, float] = {}
        for s in sorted(samples, key=lambda s: s.t):
            if s.pod in originals:
                continue
            if s.t >= after and (s.generated or 0) > 0:
                return {"t": s.t, "pod": s.pod, "after_t": last.get(s.pod), "source": "metrics"}
            last[s.pod] = s.t
        return None
    hit = first_new_serving(rounds, originals, after)
    return (
        None if hit is None else {"t": hit[0], "pod": hit[1], "after_t": None, "source": "status"}
    )


def weights_window(
    rounds: Sequence[Round], originals: set[str], after: float
) -> tuple[float | None, float | None]:
    """(first answer of a new pod loading or receiving weights, first round in which
    every new pod seen holds the whole model); None where it did not happen."""
    start = next(
        (
            s.t
            for s in _new(_all(rounds), originals, after)
            if s.phase in ("loading", "transferring") or s.blocks_loaded > 0
        ),
        None,
    )
    seen: set[str] = set()
    for r in rounds:
        if r.t < after:
            continue
        new = [w for w in r.workers if w.pod not in originals]
        seen |= {w.pod for w in new}
        if seen and len(new) == len(seen) and all(w.holds_model for w in new):
            return start, max(w.t for w in new)
    return start, None


def plan_window(plans: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """The plans' earliest startTime and latest completionTime (None: none / not ended)."""
    starts = [p["start_t"] for p in plans if p.get("start_t") is not None]
    ends = [p["end_t"] for p in plans if p.get("end_t") is not None]
    if not starts:
        return None, None
    done = len(ends) == len(plans)
    return min(starts), (max(ends) if done and ends else None)


def client_series(
    records: Sequence[RequestRecord], end_s: float, bin_s: float = 1.0
) -> list[dict[str, Any]]:
    """Per `bin_s`: tokens/s received by the clients and requests queued (sent, no first
    token yet, not ended) at the bin's start."""
    n = max(1, math.ceil(end_s / bin_s))
    tokens = [0.0] * n
    for r in records:
        if not r.token_times:
            continue
        per_chunk = r.output_tokens / len(r.token_times)
        for t in r.token_times:
            k = math.floor(t / bin_s)
            if 0 <= k < n:
                tokens[k] += per_chunk
    out = []
    for k in range(n):
        t = k * bin_s
        queued = sum(
            1
            for r in records
            if r.sent_s is not None
            and r.sent_s <= t
            and (r.token_times[0] if r.token_times else (r.end_s or math.inf)) > t
        )
        out.append({"t": t, "tokens_per_s": tokens[k] / bin_s, "queue": queued})
    return out


def worker_series(rounds: Sequence[Round]) -> list[dict[str, Any]]:
    """Per round: the workers' waiting and running, the gateway's queue and in-flight
    requests per pod, heads and stages."""
    return [
        {
            "t": round(r.t, 3),
            "waiting": sum(w.waiting for w in r.workers),
            "running": sum(w.running for w in r.workers),
            "gateway_queued": r.queued,
            "gateway_in_flight": dict(r.in_flight or {}),  # per pod: who gets requests
            "heads": sorted(w.pod for w in r.workers if w.head),
            "stages": sorted(w.pod for w in r.workers if w.stage is not None),
            "modes": {w.pod: w.mode for w in r.workers},
        }
        for r in rounds
    ]
