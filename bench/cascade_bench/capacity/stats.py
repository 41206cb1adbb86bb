"""Pure measurement arithmetic: chunk arrival times -> tokens/s and inter-token latency.

A stream is recorded as `(arrival_time, tokens_in_chunk)` pairs, in arrival order. The
first chunk carries the prefill (time to first token), so it counts as generated tokens
but yields no ITL sample. Every later chunk that arrives `gap` seconds after the one
before and carries `k` tokens yields k ITL samples of `gap / k` each: ITL is per token,
as Chiron's Figure 3 plots it, whatever the engine's chunking.

Only what arrives inside the measurement window `[start, end)` counts, so the warm-up,
and requests cut at the window's end, neither inflate nor dilute the rate: tokens/s is
tokens that arrived in the window over its length. An ITL sample belongs to the window
its ending chunk arrived in.

The closed loop replaces each finished request by a new one, whose prompt is prefilled
in the same window, so tokens over the window's length is the batch's decode speed only
while prompts are short. The profile's curve is the decode speed alone (the simulator
charges prefill on its own, prompt tokens over the prefill rate): `without_prefill`
takes out of the window the prefill time of the requests that started in it, at the
prefill rate measured on the same instance. With 180-token prompts and 64-token
outputs that share is about a fifth of the window at batch 16; with 16-token prompts
a few per cent.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from cascade_protocol.stats import percentile

Chunk = tuple[float, int]  # (arrival time in seconds, tokens in the chunk)


@dataclass(frozen=True)
class Window:
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def holds(self, t: float) -> bool:
        return self.start <= t < self.end


@dataclass(frozen=True)
class CurvePoint:
    batch: int  # requests kept in flight (per instance for the curve, in all for scaling)
    tokens_per_s: float
    itl_p50_s: float | None  # None when the window saw no second chunk of any stream
    itl_p90_s: float | None
    itl_mean_s: float | None  # CFS quota periods make ITL bimodal: p50 alone misleads
    tokens: int  # generated tokens that arrived in the window
    requests_done: int  # streams that finished inside the window
    window_s: float
    started: int = 0  # streams whose first token arrived in the window: prefilled in it
    raw_tokens_per_s: float | None = None  # before `without_prefill` (None: not applied)


def itl_samples(stream: Sequence[Chunk], window: Window) -> list[float]:
    """Per-token ITLs of one stream whose ending chunk arrived inside the window."""
    out: list[float] = []
    for (t_prev, _), (t, k) in itertools.pairwise(stream):
        if k <= 0 or not window.holds(t):
            continue
        gap = t - t_prev
        if gap < 0:
            raise ValueError("chunk arrival times must not decrease")
        out.extend([gap / k] * k)
    return out


def tokens_in(stream: Sequence[Chunk], window: Window) -> int:
    return sum(k for t, k in stream if window.holds(t))


def curve_point(
    batch: int, streams: Sequence[Sequence[Chunk]], finished: Sequence[float], window: Window
) -> CurvePoint:
    """One batch size's point: `streams` are all recorded streams (whole or cut), and
    `finished` the arrival times of the streams' last chunks for those that completed."""
    if window.seconds <= 0:
        raise ValueError("the measurement window must have a positive length")
    itls = [x for s in streams for x in itl_samples(s, window)]
    tokens = sum(tokens_in(s, window) for s in streams)
    started = sum(1 for s in streams if s and window.holds(s[0][0]))
    return CurvePoint(
        batch=batch,
        tokens_per_s=tokens / window.seconds,
        itl_p50_s=percentile(itls, 50),
        itl_p90_s=percentile(itls, 90),
        itl_mean_s=sum(itls) / len(itls) if itls else None,
        tokens=tokens,
        requests_done=sum(1 for t in finished if window.holds(t)),
        window_s=window.seconds,
        started=started,
    )


def without_prefill(
    point: CurvePoint, prompt_tokens: int, prefill_tokens_per_s: float, instances: int = 1
) -> CurvePoint:
    """The point's decode speed: its tokens over the window less the prefill time of the
    requests that started in it (see the module docstring). Over `instances` equally
    loaded instances the prefills ran side by side: each took a 1/n share of the time."""
    if prefill_tokens_per_s <= 0 or instances < 1:
        raise ValueError("the prefill rate must be positive and instances >= 1")
    prefill_s = point.started * prompt_tokens / (prefill_tokens_per_s * instances)
    decode_s = point.window_s - prefill_s
    if decode_s < 0.5 * point.window_s:
        raise ValueError(
            f"batch {point.batch}: prefill took {prefill_s:.1f} s of the {point.window_s:g} s "
            "window; decode speed cannot be told apart: use longer outputs (--max-tokens)"
        )
    return replace(point, tokens_per_s=point.tokens / decode_s, raw_tokens_per_s=point.tokens_per_s)


def per_instance(total: CurvePoint, instances: int) -> CurvePoint:
    """One instance's share of a point measured over `instances` equally loaded ones
    (ITL is per token of each stream already, so it stays). The requests it started are
    its share too: `without_prefill` charges their prompts to this instance's window."""
    if instances < 1:
        raise ValueError("instances must be >= 1")
    return replace(
        total,
        tokens_per_s=total.tokens_per_s / instances,
        tokens=round(total.tokens / instances),
        requests_done=round(total.requests_done / instances),
        started=round(total.started / instances),
    )


def knee(points: Sequence[CurvePoint], fraction: float = 0.9) -> int:
    """The smallest batch whose throughput reaches `fraction` of the curve's best."""
    if not points:
        raise ValueError("no curve points")
    best = max(p.tokens_per_s for p in points)
    return min(p.batch for p in points if p.tokens_per_s >= fraction * best)


def ratio(one: float, two: float) -> float | None:
    """Two instances' tokens/s over one's; None when one instance produced nothing."""
    return two / one if one > 0 else None


# Two instances are two of one: more than 2x (beyond this much noise) is no result but
# a defect of the measurement or of one instance's serving, to find before reporting.
SUPERLINEAR = 2.05


def superlinear(scaling_ratio: float | None) -> bool:
    return scaling_ratio is not None and scaling_ratio > SUPERLINEAR


def split(total: int, parts: int) -> list[int]:
    """`total` in-flight requests spread over `parts` instances, as evenly as possible."""
    if parts < 1 or total < 0:
        raise ValueError("need parts >= 1 and total >= 0")
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def prefill_point(prompt_tokens: int, ttfts_s: Sequence[float]) -> dict[str, float | int]:
    """Prefill tokens/s from one-token requests' times to first token (median)."""
    if not ttfts_s or min(ttfts_s) <= 0:
        raise ValueError("prefill: no positive time to first token measured")
    p50 = statistics.median(ttfts_s)
    return {
        "prompt_tokens": prompt_tokens,
        "samples": len(ttfts_s),
        "ttft_p50_s": p50,
        "ttft_max_s": max(ttfts_s),
        "tokens_per_s": prompt_tokens / p50,
    }
