"""From a production trace to a schedule the small models on these machines can serve.

Production token counts (prompts of thousands of tokens) would swamp a CPU model, and a
57-minute trace is long for a benchmark run. So a replay picks a window of the trace,
optionally compresses time, and scales token counts by a factor with a clamp. Every such
choice changes what is measured, so `describe` returns it all for the report: a result is
only comparable to another with the same scaling.

Request classes are not in the trace. A seeded hash of the request's trace index marks a
fraction as batch, so a request keeps its class whatever window or request cap is chosen,
and two runs with the same seed send the same classes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cascade_bench.replay.trace import Trace, TraceRow

INTERACTIVE = "interactive"
BATCH = "batch"
CLASSES = (INTERACTIVE, BATCH)


@dataclass(frozen=True)
class Scaling:
    """How the trace is cut, compressed and shrunk (all flags of `cascade bench replay`)."""

    start_s: float = 0.0  # window start, seconds of trace time
    duration_s: float | None = None  # window length in trace time; None: to the end
    speedup: float = 1.0  # trace seconds per replay second (2: twice the arrival rate)
    max_requests: int | None = None  # cap after windowing: the first N arrivals
    context_scale: float = 0.1  # prompt tokens = round(ContextTokens x this), clamped
    output_scale: float = 1.0  # max_tokens = round(GeneratedTokens x this), clamped
    max_prompt_tokens: int = 512  # keeps prompts inside a small model's context
    max_output_tokens: int = 256
    batch_fraction: float = 0.2  # share of requests sent as class "batch"
    seed: int = 0  # for class assignment and prompt token ids

    def check(self) -> None:
        """Raise ValueError on settings that cannot describe a replay."""
        if self.start_s < 0:
            raise ValueError(f"start must be >= 0 s, got {self.start_s}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise ValueError(f"duration must be > 0 s, got {self.duration_s}")
        if not self.speedup > 0:
            raise ValueError(f"speedup must be > 0, got {self.speedup}")
        if self.max_requests is not None and self.max_requests < 1:
            raise ValueError(f"max requests must be >= 1, got {self.max_requests}")
        for name in ("context_scale", "output_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name.replace('_', ' ')} must be > 0")
        for name in ("max_prompt_tokens", "max_output_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', ' ')} must be >= 1")
        if not 0 <= self.batch_fraction <= 1:
            raise ValueError(f"batch fraction must be in [0, 1], got {self.batch_fraction}")


@dataclass(frozen=True)
class Planned:
    """One request of the schedule: when to send it and how big it is."""

    index: int  # the trace row index: identity across windows and runs
    at_s: float  # send time, seconds after the replay starts
    prompt_tokens: int  # prompt length sent (token ids, exact)
    output_tokens: int  # max_tokens sent, with ignore_eos so the server generates them all
    request_class: str  # INTERACTIVE or BATCH
    trace_context_tokens: int  # the production counts, kept for the report
    trace_generated_tokens: int


def scale_tokens(n: int, factor: float, cap: int) -> int:
    """round(n x factor), half up, within [1, cap]: never a zero-token prompt or output."""
    return max(1, min(cap, math.floor(n * factor + 0.5)))


def is_batch(index: int, fraction: float, seed: int) -> bool:
    """Whether trace row `index` is batch: a seeded hash, uniform in [0, 1), below fraction."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < fraction


def window(rows: Sequence[TraceRow], s: Scaling) -> list[TraceRow]:
    """Rows arriving in [start, start + duration), the first `max_requests` of them."""
    end = math.inf if s.duration_s is None else s.start_s + s.duration_s
    picked = [r for r in rows if s.start_s <= r.offset_s < end]
    return picked if s.max_requests is None else picked[: s.max_requests]


def schedule(trace: Trace, s: Scaling) -> list[Planned]:
    """The requests to send, in send order. Times start at the window start, not its first
    arrival, so the gap before the first request is replayed too."""
    s.check()
    return [
        Planned(
            index=r.index,
            at_s=(r.offset_s - s.start_s) / s.speedup,
            prompt_tokens=scale_tokens(r.context_tokens, s.context_scale, s.max_prompt_tokens),
            output_tokens=scale_tokens(r.generated_tokens, s.output_scale, s.max_output_tokens),
            request_class=BATCH if is_batch(r.index, s.batch_fraction, s.seed) else INTERACTIVE,
            trace_context_tokens=r.context_tokens,
            trace_generated_tokens=r.generated_tokens,
        )
        for r in window(trace.rows, s)
    ]


def _tokens(trace_counts: list[int], sent: list[int], factor: float, cap: int) -> dict[str, Any]:
    n = len(sent)
    return {
        "scale": factor,
        "max": cap,
        "min": 1,
        "trace_mean": sum(trace_counts) / n if n else None,
        "sent_mean": sum(sent) / n if n else None,
        "trace_total": sum(trace_counts),
        "sent_total": sum(sent),
        "sent_max": max(sent, default=None),
        "clamped": sum(1 for t in trace_counts if math.floor(t * factor + 0.5) > cap),
    }


def describe(trace: Trace, s: Scaling, plan: Sequence[Planned]) -> dict[str, Any]:
    """The `scaling` section of the report: every choice between the trace and the load."""
    span = max((p.at_s for p in plan), default=0.0)
    return {
        "start_s": s.start_s,
        "duration_s": s.duration_s,
        "speedup": s.speedup,
        "max_requests": s.max_requests,
        "trace_requests": len(trace.rows),
        "selected_requests": len(plan),
        "schedule_span_s": span,
        "offered_rps": len(plan) / span if span > 0 else None,
        "prompt_tokens": _tokens(
            [p.trace_context_tokens for p in plan],
            [p.prompt_tokens for p in plan],
            s.context_scale,
            s.max_prompt_tokens,
        ),
        "output_tokens": _tokens(
            [p.trace_generated_tokens for p in plan],
            [p.output_tokens for p in plan],
            s.output_scale,
            s.max_output_tokens,
        ),
        "batch_fraction": s.batch_fraction,
        "seed": s.seed,
        "class_counts": {c: sum(1 for p in plan if p.request_class == c) for c in CLASSES},
    }
