"""Synthetic traces for the evaluation set: arrivals of a chosen burstiness, real lengths.

A production window has one arrival pattern; a policy that holds must hold on others.
Gaps between arrivals are drawn from a Gamma distribution with shape 1/cv² (mean
1/rate, coefficient of variation cv): cv 1 is a Poisson process, below 1 steadier than
Poisson, above 1 bursty (cv 4: most gaps tiny, a few long lulls). Prompt and output
lengths are drawn as pairs from a source trace (the shared production trace), so the
work per request is the production mix. Everything comes from `seed`: one seed, one
trace. `to_csv` writes the trace's own format (TIMESTAMP,ContextTokens,GeneratedTokens),
so `cascade bench autoscale --trace` and `cascade simulate` read it like any other.
"""

from __future__ import annotations

import csv
import io
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from cascade_bench.replay.trace import COLUMNS, Trace, TraceRow

MIN_CV, MAX_CV = 0.1, 8.0
EPOCH = datetime(2026, 1, 1)  # the TIMESTAMP of offset 0 in a written trace


@dataclass(frozen=True)
class ArrivalProcess:
    rate_per_s: float  # mean arrivals per second
    cv: float  # coefficient of variation of the gaps (1: Poisson)
    duration_s: float
    seed: int = 0

    @property
    def name(self) -> str:
        kind = "poisson" if self.cv == 1.0 else f"gamma-cv{self.cv:g}"
        return f"{kind}-{self.rate_per_s:g}rps-{self.duration_s:g}s-seed{self.seed}"

    def check(self) -> None:
        if not self.rate_per_s > 0 or not self.duration_s > 0:
            raise ValueError(f"need rate > 0 and duration > 0, got {self}")
        if not MIN_CV <= self.cv <= MAX_CV:
            raise ValueError(f"cv must be in [{MIN_CV}, {MAX_CV}], got {self.cv}")


def arrival_times(process: ArrivalProcess) -> list[float]:
    """Arrival offsets in [0, duration): cumulative Gamma(1/cv², cv²/rate) gaps."""
    process.check()
    rng = random.Random(f"arrivals:{process.seed}")
    shape = 1.0 / process.cv**2
    scale = 1.0 / (process.rate_per_s * shape)  # mean gap = shape x scale = 1 / rate
    out: list[float] = []
    t = rng.gammavariate(shape, scale)
    while t < process.duration_s:
        out.append(t)
        t += rng.gammavariate(shape, scale)
    return out


def synthetic_trace(process: ArrivalProcess, lengths: Trace) -> Trace:
    """Arrivals of `process`, each with a (prompt, output) pair drawn from `lengths`."""
    if not lengths.rows:
        raise ValueError(f"{lengths.name}: no rows to draw lengths from")
    rng = random.Random(f"lengths:{process.seed}")
    rows = []
    for i, at in enumerate(arrival_times(process)):
        pick = lengths.rows[rng.randrange(len(lengths.rows))]
        rows.append(TraceRow(i, at, pick.context_tokens, pick.generated_tokens))
    return Trace(f"{process.name} (lengths from {lengths.name})", tuple(rows))


def to_csv(trace: Trace) -> str:
    """The trace in the production format, offset 0 at EPOCH, microsecond stamps."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in trace.rows:
        stamp = (EPOCH + timedelta(seconds=row.offset_s)).isoformat(
            sep=" ", timespec="microseconds"
        )
        writer.writerow([stamp, row.context_tokens, row.generated_tokens])
    return out.getvalue()
