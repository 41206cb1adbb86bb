"""Replay a zigzag schedule layer by layer: when each batch really finishes (pure).

The ILP in zigzag.py models time coarsely (the source never idles, the target keeps up).
This event timeline plays the schedule out: time 0 is when execution starts, layer k
lands on the target at `layer_arrival(k)` (k * Time_l with one layer there at start),
and each instance does one layer computation at a time, w_i time units for batch i.

Target: batch i runs its layers 0..T_i-1 in order, a layer only once it has landed.
Among batches whose next layer is there, the earliest batch goes first (FCFS); a batch
whose next layer has not landed waits in a `PendingQueue`, and the target meanwhile
works on later batches, coming back when the layer lands ("whenever a new layer loads,
we scan the pending queue and execute all requests that require that layer"). A layer
computation, once started, runs to the end. Source: batch i's S_i layers start once
the target has done batch i's part and the source has finished batch i-1 (FIFO).

A batch's latency is when its last layer finishes (on the source, or on the target if
S_i = 0); the makespan is the last of these. `compare` reports both for zigzag (`solve`)
and best-effort (`best_effort`) on the same problem.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from cascade_planner.zigzag import EPS, Schedule, best_effort, layer_arrival, solve, unit_weights


class PendingQueue:
    """Requests waiting for a layer; `layer_arrived(k)` releases layer k's, FIFO."""

    def __init__(self) -> None:
        self._waiting: dict[int, deque[int]] = {}
        self._arrived: set[int] = set()

    def wait(self, request: int, layer: int) -> None:
        """Park `request` until `layer` lands (it must not have landed yet)."""
        if layer in self._arrived:
            raise ValueError(f"layer {layer} has already arrived; run request {request} now")
        self._waiting.setdefault(layer, deque()).append(request)

    def layer_arrived(self, layer: int) -> list[int]:
        """Mark `layer` landed; the requests that waited for it, in the order they came."""
        self._arrived.add(layer)
        return list(self._waiting.pop(layer, ()))

    def __len__(self) -> int:
        return sum(len(q) for q in self._waiting.values())


@dataclass(frozen=True)
class LayerRun:
    """One layer computation on the target: batch (from 0), layer (from 0), when."""

    batch: int
    layer: int
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    """What a schedule does in time; tuples are per batch, batches counted from 0."""

    target_done: tuple[float, ...]  # batch's T_i layers done on the target (0 if T_i = 0)
    source_start: tuple[float, ...]  # source starts the batch (= target_done if S_i = 0)
    finish: tuple[float, ...]  # the batch's latency: its last layer is done
    target_runs: tuple[LayerRun, ...]  # in the order the target ran them

    @property
    def makespan(self) -> float:
        return max(self.finish, default=0.0)

    @property
    def mean_latency(self) -> float:
        return sum(self.finish) / len(self.finish) if self.finish else 0.0

    @property
    def source_waits(self) -> tuple[float, ...]:
        """How long the source, free after batch i-1, waited for the target's part of i."""
        out, free = [], 0.0
        for done, start, end in zip(self.target_done, self.source_start, self.finish, strict=True):
            if end > start:  # the batch used the source
                out.append(max(0.0, done - free))
                free = end
            else:
                out.append(0.0)
        return tuple(out)


def simulate_timeline(
    targets: Sequence[int],
    num_layers: int,
    load_time: float,
    *,
    loaded_at_start: int = 1,
    weights: Sequence[float] | None = None,
) -> Timeline:
    """Replay per-batch target layer counts T_i (S_i = L - T_i) as described above."""
    if any(not 0 <= t <= num_layers for t in targets):
        raise ValueError(f"every T_i must lie in [0, {num_layers}]: {list(targets)}")
    w = unit_weights(weights, len(targets))
    done_at, runs = _run_target(targets, num_layers, load_time, loaded_at_start, w)
    starts: list[float] = []
    finish: list[float] = []
    free = 0.0
    for i, t in enumerate(targets):
        s = num_layers - t
        start = done_at[i] if s == 0 else max(free, done_at[i])
        end = start + w[i] * s
        if s:
            free = end
        starts.append(start)
        finish.append(end)
    return Timeline(tuple(done_at), tuple(starts), tuple(finish), tuple(runs))


def _run_target(
    targets: Sequence[int],
    num_layers: int,
    load_time: float,
    loaded_at_start: int,
    w: Sequence[float],
) -> tuple[list[float], list[LayerRun]]:
    """The target's side: FCFS among ready batches, the rest parked per missing layer."""
    done = [0] * len(targets)
    done_at = [0.0] * len(targets)
    runs: list[LayerRun] = []
    ready: list[int] = []
    pending = PendingQueue()
    clock = 0.0
    landed = 0  # layers 0..landed-1 have been announced to the pending queue

    def enqueue(batch: int) -> None:
        layer = done[batch]
        if layer_arrival(layer, load_time, loaded_at_start) <= clock + EPS:
            heapq.heappush(ready, batch)
        else:
            pending.wait(batch, layer)

    for batch, t in enumerate(targets):
        if t:
            enqueue(batch)
    while ready or len(pending):
        while landed < num_layers and (
            layer_arrival(landed, load_time, loaded_at_start) <= clock + EPS
        ):
            for batch in pending.layer_arrived(landed):
                heapq.heappush(ready, batch)
            landed += 1
        if not ready:
            clock = layer_arrival(landed, load_time, loaded_at_start)
            continue
        batch = heapq.heappop(ready)
        end = clock + w[batch]
        runs.append(LayerRun(batch, done[batch], clock, end))
        clock = end
        done[batch] += 1
        if done[batch] == targets[batch]:
            done_at[batch] = clock
        else:
            enqueue(batch)
    return done_at, runs


def timeline(schedule: Schedule) -> Timeline:
    """`simulate_timeline` for a `Schedule` (its L, Time_l, a and weights)."""
    return simulate_timeline(
        schedule.targets,
        schedule.num_layers,
        schedule.load_time,
        loaded_at_start=schedule.loaded_at_start,
        weights=schedule.weights,
    )


@dataclass(frozen=True)
class Comparison:
    """Zigzag and best-effort on one problem, planned and replayed."""

    zigzag: Schedule
    best_effort: Schedule
    zigzag_timeline: Timeline
    best_effort_timeline: Timeline


def compare(
    num_layers: int,
    num_batches: int,
    load_time: float,
    *,
    loaded_at_start: int = 1,
    weights: Sequence[float] | None = None,
) -> Comparison:
    """Plan both policies and replay them: per-batch latency and makespan of each."""
    zz = solve(num_layers, num_batches, load_time, loaded_at_start=loaded_at_start, weights=weights)
    be = best_effort(
        num_layers, num_batches, load_time, loaded_at_start=loaded_at_start, weights=weights
    )
    return Comparison(zz, be, timeline(zz), timeline(be))
