"""The one load every run replays: a trace window, scaled so its busiest minute needs
about maxReplicas instances of the measured capacity profile.

1. The window and token scaling are the replay's (`cascade_bench.replay.scale`): the
   same flags pick the same requests with the same classes (a seeded hash marks a
   share as batch).
2. Rate: `cascade simulate --peak-instances`'s rule (`cascade_sim.workload`). A request
   costs an instance `prompt / prefill rate + output / tokens_per_s(b)` seconds, b the
   largest batch whose step time (b / tokens_per_s(b)) meets the interactive ITL SLO
   (at most the engine's max batch), prefill at the profile's peak tokens/s; a minute
   needs the sum of its requests' costs over 60 s. Demand grows linearly with the rate,
   so K = peak instances / (the busiest minute's demand at K = 1), and each request is
   sent K times on average (`replicate`: floor(K) or ceil(K) copies by a seeded hash,
   copies within 1 s after the original, each copy's class drawn again). The trace's
   shape over minutes and the window's length stay, so any trace with these columns
   gets a load of the same height. K < 1 thins the trace the same way.
3. The same arrivals go to the cluster (as replay `Planned` requests) and to the
   simulator (as `Arrival`s). A copy gets its own request index (trace row + copy x
   `COPY_STRIDE`), so its prompt ids differ from the original's (no shared prefix).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cascade_bench.replay.scale import BATCH, INTERACTIVE, Planned, Scaling, describe, schedule
from cascade_bench.replay.trace import Trace, load_trace
from cascade_sim import workload as wl
from cascade_sim.profile import CapacityProfile

COPY_STRIDE = 10_000_000  # request index of copy j of trace row i: i + j x stride


@dataclass(frozen=True)
class RateChoice:
    peak_instances: float | None  # scale so the busiest minute needs this many
    rate_scale: float | None = None  # or this K, given outright (wins when set)


@dataclass(frozen=True)
class Load:
    planned: list[Planned]  # what the cluster runs send, in send order
    arrivals: list[wl.Arrival]  # the same requests for the simulator
    doc: dict[str, Any]  # every choice between the trace and the load


def window(trace_path: Path, scaling: Scaling) -> tuple[Trace, list[Planned]]:
    """The trace and the requests its chosen window sends (an empty window is an error)."""
    trace = load_trace(trace_path)
    plan = schedule(trace, scaling)
    if not plan:
        raise ValueError(f"{trace_path}: no request in the chosen window")
    return trace, plan


def mean_prompt_tokens(trace_path: Path, scaling: Scaling) -> int:
    """The mean prompt length the window sends: the context a profile must be measured at
    (decode attends over it; tiny-llama decodes ~2-3x slower at 180 tokens than at 16)."""
    _, plan = window(trace_path, scaling)
    return max(1, round(sum(p.prompt_tokens for p in plan) / len(plan)))


def demand_batch(profile: CapacityProfile, itl_s: float | None, max_batch: int) -> int:
    """The batch an instance runs at while meeting the interactive ITL SLO."""
    return profile.batch_for_itl(itl_s, max_batch) if itl_s else max_batch


def to_arrivals(plan: Sequence[Planned]) -> list[wl.Arrival]:
    return [
        wl.Arrival(p.index, p.at_s, p.prompt_tokens, p.output_tokens, p.request_class == BATCH)
        for p in plan
    ]


def to_planned(arrivals: Sequence[wl.Arrival], originals: Sequence[Planned]) -> list[Planned]:
    """Replay requests for `arrivals` (copies included), each with its own index."""
    by_index = {p.index: p for p in originals}
    copies = Counter[int]()
    out = []
    for a in arrivals:
        base = by_index[a.index]
        j = copies[a.index]
        copies[a.index] += 1
        out.append(
            replace(
                base,
                index=a.index + j * COPY_STRIDE,
                at_s=a.at_s,
                request_class=BATCH if a.batch else INTERACTIVE,
            )
        )
    return out


def build(
    trace_path: Path,
    scaling: Scaling,
    rate: RateChoice,
    profile: CapacityProfile,
    itl_s: float | None,
    max_batch: int,
) -> Load:
    """The scaled load and its description."""
    trace, plan = window(trace_path, scaling)
    prefill = profile.prefill_tokens_per_s
    batch = demand_batch(profile, itl_s, max_batch)
    base = to_arrivals(plan)
    peak_at_1 = wl.peak_demand(base, profile, batch, prefill)
    if rate.rate_scale is not None:
        k = rate.rate_scale
    elif rate.peak_instances is not None:
        k = wl.rate_scale_for_peak(base, rate.peak_instances, profile, batch, prefill)
    else:
        k = 1.0
    arrivals = base if k == 1.0 else wl.replicate(base, k, scaling.seed, scaling.batch_fraction)
    planned = to_planned(arrivals, plan)
    doc = describe(trace, scaling, plan)
    doc.update(
        trace=str(trace_path),
        rate_scale=k,
        rate_rule=(
            "given"
            if rate.rate_scale is not None
            else "peak-instances"
            if rate.peak_instances is not None
            else "none"
        ),
        peak_instances_target=rate.peak_instances,
        peak_instances_demand_at_1x=peak_at_1,
        peak_instances_demand=wl.peak_demand(arrivals, profile, batch, prefill),
        demand_batch=batch,
        prefill_tokens_per_s=prefill,
        sent_requests=len(planned),
        sent_classes={
            c: sum(1 for p in planned if p.request_class == c) for c in (INTERACTIVE, BATCH)
        },
    )
    return Load(planned, arrivals, doc)
