"""What `cascade simulate` predicts for the same load, profile and manifest (acceptance 7).

The simulator (`cascade_sim`, pure) runs each policy over the very arrivals the cluster
runs replayed (copies and classes included), the capacity profile the rate was scaled
with and the Cascade run's ModelDeployment. Its time to ready is the one number the
model needs from the cluster, and it is taken from what was known before any replay
(`ready_before_replay`): given (--time-to-ready), else how long the first run's initial
instances took from creation until the gateway routed to them all, else
`DEFAULT_TIME_TO_READY_S`. The scale-ups' measured time to ready is recorded beside it,
so a prediction error can be traced to that input rather than hidden by it (issue 33:
fed the run's own measurement, the simulator's check could not fail on it). The
simulated KPA is the simulator's (60 s / 6 s averaging windows, see docs/simulate.md),
not the bench's loop: its row is shown for reference, only the Cascade run is judged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cascade_bench.autoscale import manifest
from cascade_bench.autoscale.document import ttft_bins
from cascade_sim import policies
from cascade_sim import workload as wl
from cascade_sim.config import SimConfig
from cascade_sim.metrics import summarize
from cascade_sim.profile import CapacityProfile
from cascade_sim.sim import simulate

DEFAULT_TIME_TO_READY_S = 20.0


def predict(
    arrivals: Sequence[wl.Arrival],
    base_spec: Mapping[str, Any],
    profile: CapacityProfile,
    runs: Sequence[str],
    time_to_ready_s: float,
    kpa_target: float | None,
) -> dict[str, Any]:
    """{run: the simulator's document (the run's row keys), ...} plus how it was set up."""
    dep = manifest.deployment(manifest.run_spec(base_spec, "cascade"))
    cfg = SimConfig(time_to_ready_s=time_to_ready_s, kpa_target=kpa_target)
    out: dict[str, Any] = {}
    for run in runs:
        began = time.perf_counter()
        policy = policies.make(run, dep, kpa_target)  # same names
        result = simulate(arrivals, dep, profile, policy, cfg)
        doc = summarize(result, dep.slos, timeline=False)
        doc["wall_s"] = time.perf_counter() - began
        doc["scalings"] = len(doc["scaling_events"])
        doc["instances"] = [
            [row["t"], row["interactive"] + row["mixed"] + row["batch"] + row["draining"]]
            for row in result.timeline
        ]
        doc["timeline"] = result.timeline  # queues and mean cap, beside the cluster's
        slos = {c: slo.ttft_s for c, slo in dep.slos.items()}
        doc["ttft_bins"] = ttft_bins([_record(r) for r in result.requests], slos)
        out[run] = doc
    return out


def _record(r: wl.Req) -> dict[str, Any]:
    """A simulated request as the replay records one, for the same TTFT bins."""
    done = not math.isnan(r.first)
    return {
        "scheduled_s": r.arrival,
        "class": "batch" if r.batch else "interactive",
        "ttft_s": r.first - r.arrival if done else None,
        "error": None if done else "not served",
    }


def ready_before_replay(
    given_s: float | None, deploys: Sequence[tuple[int, float]]
) -> tuple[float, str]:
    """The simulator's time to ready and where it came from, from inputs known before
    the replays: `given_s`, else the first run's deploy (replicas, creation to all
    routed, seconds; `deploys` in run order), else the default."""
    if given_s is not None:
        return given_s, "given (--time-to-ready)"
    for replicas, seconds in deploys:
        if replicas > 0 and seconds > 0:
            return (
                seconds,
                f"before the replay: the first run's {replicas} instance(s), created to routed",
            )
    return DEFAULT_TIME_TO_READY_S, "default (no deploy timed)"


def sim_config(
    time_to_ready_s: float,
    source: str,
    kpa_target: float | None,
    measured_s: float | None = None,
) -> dict[str, Any]:
    """The simulator's setup as the document records it; `measured_s`: the median time
    to ready of the pods the runs' scale-ups started (None: none did), for comparison."""
    from dataclasses import asdict

    cfg = asdict(SimConfig(time_to_ready_s=time_to_ready_s, kpa_target=kpa_target))
    return {**cfg, "time_to_ready_source": source, "time_to_ready_measured_s": measured_s}
