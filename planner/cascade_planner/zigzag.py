"""Zigzag scheduling for live autoscaling (BlitzScale, OSDI'25 §5.2): pure, stdlib only.

While a new instance (the target, inst.1) loads the model layer by layer, an overloaded
instance holding the whole model (the source, inst.0) shares each request batch with
it: batch i runs its first T_i layers on the target, the other S_i = L - T_i on the
source (its pipeline configuration). Best-effort (`best_effort`, the paper's baseline)
gives each batch as many layers as the target holds when it reaches the batch, at most
half the model; early on that is one layer, so the source stays overloaded. Zigzag
(`solve`) plans all batches at once: it may give a batch layers that have not arrived
yet, because the target comes back to that batch ("zigzag") when they land, as long as
they land before the source needs the batch; meanwhile it works on later batches.

`solve` returns the exact optimum of the paper's ILP (1): minimise the mean latency
(sum over req of sum_{i<=req} S_i) / N subject to
  C1  T_i + S_i = L;
  C2  sum_{j<=i} T_j <= sum_{j<i} S_j for i > 1 (the target finishes its part of
      batch i before the source, busy with batches 1..i-1 until then, starts it);
  C3  the load limit, in one of two readings (`LoadLimit`), with a = loaded_at_start:
      "zigzag" (default): Time_l * (T_i - a) <= sum_{j<i} S_j: the last target layer of
      batch i (layer T_i - 1, counting from 0, which lands at Time_l * (T_i - a) since
      layer k >= a lands at (k - a + 1) * Time_l) lands before the source starts it;
      "contiguous": Time_l * (T_i - a) <= sum_{j<i} T_j: all T_i layers are there when
      the target, running batches back to back, starts batch i. With a = 0 this is the
      printed C3 word for word.
Decision: C3 holds for every i, i = 1 included, so T_1 <= a (execution starts once the
first a layers are there; the paper's Figure 12 has a = 1). Why "zigzag" is the
default: the printed (contiguous) C3 measures time by the target's own work, so a
target that starts with one layer can never take a second one (T = (1, 0, 0, ...) for
Time_l > 1), and the paper's own Figure 12 (b) breaks it (batch 2 is (2, 5) with one
unit of target work before it). The zigzag reading is the paper's sentence ("when the
target executes request i's T_i layers, all these layers must be loaded") with the
zigzag's deadline, the source's clock, the one C2 uses.

Weights (the paper's "regulation parameter" for LLM batches): batch i's layer takes
w_i time units on either instance (prefill time is about linear in batched tokens);
Time_l stays in units of a weight-1 layer. Every layer count that stands for a time
becomes a weighted sum: the objective is (sum_req sum_{i<=req} w_i S_i) / N, C2 is
sum_{j<=i} w_j T_j <= sum_{j<i} w_j S_j, C3's right-hand side sum_{j<i} w_j S_j (zigzag)
or sum_{j<i} w_j T_j (contiguous). All ones give (1) back exactly.

After C1 the only thing later batches see of batches 1..i is Q_i = sum_{j<=i} w_j T_j,
so `solve` is a dynamic program over (i, Q_i): O(N * NL * L) states x moves with unit
weights. Under "zigzag" a smaller Q_i leaves every later constraint easier, so states
that are no cheaper than one with a smaller Q_i are dropped (exact). With unit (or
integer) weights Q_i lives on a small grid (32 layers x 12 batches: a few ms); with
arbitrary real weights the distinct Q_i multiply (about 0.2 s for 12 random weights,
40 ms with weights rounded to quarters), still exact. The timeline
(zigzag_timeline.py) replays a schedule layer by layer to measure what it really costs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

LoadLimit = Literal["zigzag", "contiguous"]
EPS = 1e-9  # slack for float comparisons when weights are not integers


def layer_arrival(layer: int, load_time: float, loaded_at_start: int = 1) -> float:
    """When layer `layer` (from 0) is on the target; time 0 is when execution starts."""
    return 0.0 if layer < loaded_at_start else (layer - loaded_at_start + 1) * load_time


def layers_loaded(at: float, num_layers: int, load_time: float, loaded_at_start: int = 1) -> int:
    """How many layers (a prefix, in order) the target holds at time `at`."""
    if load_time <= 0:
        return num_layers
    return min(num_layers, max(0, loaded_at_start + math.floor(at / load_time + EPS)))


def unit_weights(weights: Sequence[float] | None, num_batches: int) -> tuple[float, ...]:
    """The per-layer time of each batch: `weights`, or 1.0 each; checked."""
    if weights is None:
        return (1.0,) * num_batches
    if len(weights) != num_batches or any(not w > 0 for w in weights):
        raise ValueError(f"need {num_batches} positive weights, got {list(weights)}")
    return tuple(float(w) for w in weights)


def average_latency(configs: Sequence[tuple[int, int]], weights: Sequence[float]) -> float:
    """The ILP objective: (sum_req sum_{i<=req} w_i S_i) / N."""
    n = len(configs)
    total = sum((n - i) * w * s for i, ((_, s), w) in enumerate(zip(configs, weights, strict=True)))
    return total / n if n else 0.0


def violations(
    configs: Sequence[tuple[int, int]],
    num_layers: int,
    load_time: float,
    *,
    loaded_at_start: int = 1,
    weights: Sequence[float] | None = None,
    load_limit: LoadLimit = "zigzag",
) -> list[str]:
    """The constraints (C1, C2, C3) that `configs` (T_i, S_i) break; batches count from 1."""
    w = unit_weights(weights, len(configs))
    out: list[str] = []
    done_t = done_s = 0.0  # sum_{j<i} w_j T_j, sum_{j<i} w_j S_j
    for i, ((t, s), wi) in enumerate(zip(configs, w, strict=True), start=1):
        if t < 0 or s < 0 or t + s != num_layers:
            out.append(f"C1: batch {i}: T + S = {t} + {s} != L = {num_layers}")
        if i > 1 and done_t + wi * t > done_s + EPS:
            out.append(
                f"C2: batch {i}: target done at {done_t + wi * t:g} > source start {done_s:g}"
            )
        deadline = done_s if load_limit == "zigzag" else done_t
        if load_time * (t - loaded_at_start) > deadline + EPS:
            out.append(
                f"C3: batch {i}: layer {t - 1} lands at "
                f"{load_time * (t - loaded_at_start):g} > {deadline:g} ({load_limit})"
            )
        done_t += wi * t
        done_s += wi * s
    return out


@dataclass(frozen=True)
class Schedule:
    """Per-batch pipeline configurations (T_i, S_i) and the mean latency they model."""

    num_layers: int
    load_time: float
    configs: tuple[tuple[int, int], ...]
    objective: float
    loaded_at_start: int = 1
    weights: tuple[float, ...] | None = None
    load_limit: LoadLimit = "zigzag"

    @property
    def targets(self) -> tuple[int, ...]:
        return tuple(t for t, _ in self.configs)

    @property
    def sources(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.configs)

    def violations(self) -> list[str]:
        """C1-C3 as this schedule was planned under; empty when all hold."""
        return violations(
            self.configs,
            self.num_layers,
            self.load_time,
            loaded_at_start=self.loaded_at_start,
            weights=self.weights,
            load_limit=self.load_limit,
        )


def make_schedule(
    targets: Sequence[int],
    num_layers: int,
    load_time: float,
    *,
    loaded_at_start: int = 1,
    weights: Sequence[float] | None = None,
    load_limit: LoadLimit = "zigzag",
) -> Schedule:
    """A `Schedule` from per-batch target layer counts T_i (S_i = L - T_i)."""
    w = unit_weights(weights, len(targets))
    configs = tuple((t, num_layers - t) for t in targets)
    return Schedule(
        num_layers=num_layers,
        load_time=load_time,
        configs=configs,
        objective=average_latency(configs, w),
        loaded_at_start=loaded_at_start,
        weights=None if weights is None else w,
        load_limit=load_limit,
    )


def _check_args(num_layers: int, num_batches: int, load_time: float, loaded_at_start: int) -> None:
    if num_layers < 1 or num_batches < 0 or load_time < 0 or loaded_at_start < 0:
        raise ValueError(
            f"bad problem: L={num_layers} N={num_batches} "
            f"load_time={load_time} loaded_at_start={loaded_at_start}"
        )


def _max_target(
    i: int, q: float, done_s: float, wi: float, num_layers: int, load_time: float, a: int, mode: str
) -> int:
    """Largest T_i that C2 and C3 allow after batches with sum w T = q (all T below fit too)."""
    bound = float(num_layers)
    if i > 0:
        bound = min(bound, (done_s - q) / wi)  # C2: q + w_i T_i <= sum_{j<i} w_j S_j
    if load_time > 0:
        deadline = done_s if mode == "zigzag" else q
        bound = min(bound, a + deadline / load_time)  # C3
    return math.floor(bound + EPS)


def solve(
    num_layers: int,
    num_batches: int,
    load_time: float,
    *,
    loaded_at_start: int = 1,
    weights: Sequence[float] | None = None,
    load_limit: LoadLimit = "zigzag",
) -> Schedule:
    """The exact optimum of ILP (1) (C3 read as `load_limit`), by DP over (i, Q_i)."""
    _check_args(num_layers, num_batches, load_time, loaded_at_start)
    w = unit_weights(weights, num_batches)
    frontier: dict[float, float] = {0.0: 0.0}  # Q -> least sum of (N - i) w_i S_i so far
    parents: list[dict[float, tuple[float, int]]] = []  # per batch: Q -> (previous Q, T)
    total_w = 0.0  # sum_{j<i} w_j
    for i, wi in enumerate(w):
        cost_per_layer = (num_batches - i) * wi
        nxt: dict[float, float] = {}
        parent: dict[float, tuple[float, int]] = {}
        for q, cost in frontier.items():
            done_s = num_layers * total_w - q
            top = _max_target(i, q, done_s, wi, num_layers, load_time, loaded_at_start, load_limit)
            for t in range(top + 1):
                nq, nc = q + wi * t, cost + cost_per_layer * (num_layers - t)
                if nq not in nxt or nc < nxt[nq]:
                    nxt[nq], parent[nq] = nc, (q, t)
        frontier = _pareto(nxt) if load_limit == "zigzag" else nxt
        parents.append(parent)
        total_w += wi
    q = min(frontier, key=lambda k: (frontier[k], k))
    targets: list[int] = []
    for parent in reversed(parents):
        q, t = parent[q]
        targets.append(t)
    return make_schedule(
        targets[::-1],
        num_layers,
        load_time,
        loaded_at_start=loaded_at_start,
        weights=weights,
        load_limit=load_limit,
    )


def _pareto(states: dict[float, float]) -> dict[float, float]:
    """Keep a state only if it is cheaper than every state with a smaller Q."""
    kept: dict[float, float] = {}
    best = math.inf
    for q in sorted(states):
        if states[q] < best:
            kept[q] = best = states[q]
    return kept


def best_effort(
    num_layers: int,
    num_batches: int,
    load_time: float,
    *,
    loaded_at_start: int = 1,
    weights: Sequence[float] | None = None,
) -> Schedule:
    """The paper's baseline: each batch takes the layers the target holds when it starts it.

    The target runs batches back to back from time 0; batch i starts at
    sum_{j<i} w_j T_j and takes min(layers held then, L // 2) layers ("not exceeding
    half"), all already loaded, so it never waits. The rest runs on the source.
    """
    _check_args(num_layers, num_batches, load_time, loaded_at_start)
    w = unit_weights(weights, num_batches)
    targets: list[int] = []
    clock = 0.0
    for wi in w:
        t = min(num_layers // 2, layers_loaded(clock, num_layers, load_time, loaded_at_start))
        targets.append(t)
        clock += wi * t
    return make_schedule(
        targets,
        num_layers,
        load_time,
        loaded_at_start=loaded_at_start,
        weights=weights,
        load_limit="contiguous",
    )
