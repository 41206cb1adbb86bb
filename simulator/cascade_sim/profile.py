"""One instance's speed as a function of its running batch: the capacity profile.

`cascade bench capacity` measures tokens/s with exactly b requests in flight for a few b
(its JSON `curve`). The simulator needs the decode step time at every batch size, so the
curve is interpolated piecewise linearly in tokens/s, then

    step time(b) = b / tokens_per_s(b)

which is the *mean* inter-token latency at batch b: every running request gets one token
per step. The curve's `itl_p50_s` is not used for time: under a CFS quota ITL is bimodal
(quota periods), so its p50 is far below the mean (2.9 ms vs 6.3 ms at batch 1 at 0.5
core) and would disagree with the measured throughput; b / tokens/s agrees with both the
throughput and `itl_mean_s` (8 / 340 tok/s = 23.5 ms vs 22.7 ms measured).

Below the first measured batch, tokens/s scales in proportion to b (from the origin);
above the last, it stays flat (more requests only share the same throughput), so the
step time grows linearly there.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CurvePoint:
    batch: int  # requests in flight on one instance
    tokens_per_s: float  # decode tokens/s of the instance at that batch


@dataclass(frozen=True)
class CapacityProfile:
    """The measured curve, sorted by batch; interpolated by `tokens_per_s`."""

    points: tuple[CurvePoint, ...]
    model: str = ""
    node_cpu: float | None = None
    prefill_per_s: float | None = None  # measured prefill tokens/s (the document's `prefill`)

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("capacity profile: the curve has no points")
        batches = [p.batch for p in self.points]
        if batches != sorted(set(batches)) or batches[0] < 1:
            raise ValueError("capacity profile: batches must be distinct, >= 1 and sorted")
        if any(p.tokens_per_s <= 0 for p in self.points):
            raise ValueError("capacity profile: tokens_per_s must be > 0 at every batch")

    @property
    def peak_tokens_per_s(self) -> float:
        return max(p.tokens_per_s for p in self.points)

    @property
    def prefill_tokens_per_s(self) -> float:
        """Prefill speed: measured, else the decode peak (profiles from before the bench
        measured it; a cautious guess, as a prefill token costs less than a decode's)."""
        return self.prefill_per_s or self.peak_tokens_per_s

    def tokens_per_s(self, batch: float) -> float:
        """Instance decode throughput at `batch` running requests (0 at 0)."""
        pts = self.points
        if batch <= 0:
            return 0.0
        if batch <= pts[0].batch:
            return pts[0].tokens_per_s * batch / pts[0].batch
        if batch >= pts[-1].batch:
            return pts[-1].tokens_per_s
        i = bisect.bisect_right([p.batch for p in pts], batch)
        lo, hi = pts[i - 1], pts[i]
        frac = (batch - lo.batch) / (hi.batch - lo.batch)
        return lo.tokens_per_s + frac * (hi.tokens_per_s - lo.tokens_per_s)

    def step_s(self, batch: int) -> float:
        """One decode step (the mean ITL) with `batch` requests decoding; 0 with none."""
        return batch / self.tokens_per_s(batch) if batch > 0 else 0.0

    def step_table(self, limit: int) -> list[float]:
        """`step_s(b)` for b = 0..limit, looked up in the simulator's inner loop."""
        return [self.step_s(b) for b in range(limit + 1)]

    def batch_for_itl(self, itl_s: float, limit: int) -> int:
        """The largest batch <= limit whose step time meets `itl_s` (at least 1)."""
        best = 1
        for b in range(1, limit + 1):
            if self.step_s(b) <= itl_s:
                best = b
        return best


def from_document(doc: Mapping[str, Any]) -> CapacityProfile:
    """A profile from `cascade bench capacity --json` (keys: model, node_cpu, curve, and
    prefill when measured)."""
    curve = doc.get("curve")
    if not isinstance(curve, Sequence) or not curve:
        raise ValueError("capacity profile: no `curve` list")
    try:
        points = sorted(
            (CurvePoint(int(c["batch"]), float(c["tokens_per_s"])) for c in curve),
            key=lambda p: p.batch,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"capacity profile: bad curve point ({exc})") from None
    cpu = doc.get("node_cpu")
    model = str(doc.get("model", ""))
    prefill = doc.get("prefill")
    rate = prefill.get("tokens_per_s") if isinstance(prefill, Mapping) else None
    if rate is not None and (not isinstance(rate, (int, float)) or rate <= 0):
        raise ValueError(f"capacity profile: prefill tokens_per_s must be > 0, got {rate!r}")
    return CapacityProfile(
        tuple(points),
        model,
        None if cpu is None else float(cpu),
        None if rate is None else float(rate),
    )
