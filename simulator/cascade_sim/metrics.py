"""From a run's request records to the numbers the SLOs and the bill are written in.

The definitions are the replay benchmark's (cascade_bench.replay.metrics), so a
simulation and a cluster run are judged alike:

- a request meets its SLO when it completed, its TTFT (arrival to first token, queueing
  included) is within its class's TTFT bound and its mean ITL ((last token - first
  token) / (tokens - 1)) within its class's ITL bound; a single-token output has no ITL
  and meets that bound;
- attainment is over *all* requests of the class: rejected (429), given up (client
  timeout) and unfinished ones count as misses;
- latency percentiles are over completed requests only, with linear interpolation
  between ranks (numpy's default, as the replay's `percentile`);
- instance-seconds integrate every instance from the tick that ordered it until it is
  gone (starting and draining included) over the run (start to the last request's end).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from cascade_protocol.stats import percentile
from cascade_sim.config import BATCH, CLASSES, INTERACTIVE, Slo
from cascade_sim.sim import Result
from cascade_sim.workload import Req


def completed(r: Req) -> bool:
    return not math.isnan(r.finished)


def meets(r: Req, slo: Slo) -> bool:
    if not completed(r) or r.ttft_s > slo.ttft_s:
        return False
    itl = r.mean_itl_s
    return slo.itl_s is None or itl is None or itl <= slo.itl_s


def class_summary(reqs: Sequence[Req], slo: Slo) -> dict[str, Any]:
    done = [r for r in reqs if completed(r)]
    ttft = [r.ttft_s for r in done]
    itl = [m for r in done if (m := r.mean_itl_s) is not None]
    met = sum(1 for r in reqs if meets(r, slo))
    lost = sum(1 for r in reqs if r.rejected or r.timed_out)
    return {
        "requests": len(reqs),
        "completed": len(done),
        "rejected": sum(1 for r in reqs if r.rejected),
        "timed_out": sum(1 for r in reqs if r.timed_out),
        "unfinished": len(reqs) - len(done) - lost,
        "preempted": sum(r.preempted for r in reqs),  # times batch work made way
        "met": met,
        "attainment": met / len(reqs) if reqs else None,
        "ttft_s": {f"p{q}": percentile(ttft, q) for q in (50, 90, 99)},
        "mean_itl_s": {"p50": percentile(itl, 50), "p99": percentile(itl, 99)},
        "slo": {"ttft_s": slo.ttft_s, "itl_s": slo.itl_s},
    }


def summarize(result: Result, slos: Mapping[str, Slo], timeline: bool = False) -> dict[str, Any]:
    """The run's document: the `--json` keys, per policy."""
    by_class = {
        c: class_summary([r for r in result.requests if r.batch == (c == BATCH)], slos[c])
        for c in CLASSES
    }
    seconds = result.pool.instance_seconds(result.end_s)
    counts = [len([i for i in result.pool.all if i.created == 0.0])]
    counts += [e.after for e in result.events]
    doc: dict[str, Any] = {
        "policy": result.policy,
        "slo_attainment": {c: by_class[c]["attainment"] for c in CLASSES},
        "ttft_p99_s": {c: by_class[c]["ttft_s"]["p99"] for c in CLASSES},
        "requests": {c: by_class[c]["requests"] for c in CLASSES},
        "rejected": by_class[INTERACTIVE]["rejected"] + by_class[BATCH]["rejected"],
        "instance_seconds": seconds,
        "duration_s": result.end_s,
        "mean_instances": seconds / result.end_s if result.end_s > 0 else None,
        "peak_instances": max(counts),
        "scaling_events": [
            {"t": e.t, "from": e.before, "to": e.after, "roles": e.roles, "reason": e.reason}
            for e in result.events
        ],
        "classes": by_class,
    }
    if timeline:
        doc["timeline"] = result.timeline
    return doc
