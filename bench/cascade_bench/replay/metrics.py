"""From request records to the numbers a serving SLO is written in.

- TTFT: first chunk with text minus the first send (retries and queueing included).
- ITL: gaps between successive chunks with text, pooled over a class's requests, as
  vLLM's serving benchmark reports them.
- Mean ITL of a request: (last token - first token) / (output tokens - 1), with the output
  length from `usage`; it equals the mean chunk gap when each chunk carries one token and
  stays right when a server coalesces tokens into fewer chunks. The ITL SLO bounds it.
- SLO attainment: the fraction of *all* requests of a class (rejected and failed ones
  count as misses) whose TTFT and mean ITL meet that class's bounds. Latency percentiles
  are over completed requests only, so errors are reported as counts beside them.
- Throughput: completed output tokens and requests over the replay's wall time (start of
  the schedule to the last request's end), the same denominator for every class.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cascade_bench.replay.record import RequestRecord
from cascade_bench.replay.scale import BATCH, CLASSES, INTERACTIVE
from cascade_protocol.stats import percentile

QUANTILES = (50, 90, 99)


@dataclass(frozen=True)
class Slo:
    """Per-class latency bounds; None means unbounded."""

    ttft_s: float | None
    itl_s: float | None  # bound on the request's mean ITL

    def to_json(self) -> dict[str, float | None]:
        return {"ttft_s": self.ttft_s, "itl_s": self.itl_s}


DEFAULT_SLOS: Mapping[str, Slo] = {
    INTERACTIVE: Slo(ttft_s=2.0, itl_s=0.2),
    BATCH: Slo(ttft_s=30.0, itl_s=None),
}


def distribution(values: Sequence[float]) -> dict[str, float | None]:
    """mean, p50/p90/p99 and max; all None for no values."""
    out: dict[str, float | None] = {"mean": sum(values) / len(values) if values else None}
    out.update({f"p{q}": percentile(values, q) for q in QUANTILES})
    out["max"] = max(values, default=None)
    return out


def itl_gaps(token_times: Sequence[float]) -> list[float]:
    """Gaps between successive token (chunk) arrivals."""
    return [b - a for a, b in itertools.pairwise(token_times)]


def mean_itl(r: RequestRecord) -> float | None:
    """Per-token time after the first token; None with fewer than two tokens or chunks
    (a single chunk shows no spacing between its tokens)."""
    if len(r.token_times) < 2 or r.output_tokens < 2:
        return None
    return (r.token_times[-1] - r.token_times[0]) / (r.output_tokens - 1)


def slo_checks(r: RequestRecord, slo: Slo) -> tuple[bool, bool]:
    """(TTFT met, ITL met). A request that did not complete meets neither; one with a
    single output token has no ITL and meets the ITL bound."""
    if not r.ok:
        return False, False
    ttft = r.ttft_s
    ttft_ok = slo.ttft_s is None or (ttft is not None and ttft <= slo.ttft_s)
    itl = mean_itl(r)
    itl_ok = slo.itl_s is None or itl is None or itl <= slo.itl_s
    return ttft_ok, itl_ok


def summarize(
    records: Iterable[RequestRecord], slos: Mapping[str, Slo], wall_s: float
) -> dict[str, Any]:
    """One class's (or all classes') summary; each request is judged by its own class's SLO."""
    rs = list(records)
    done = [r for r in rs if r.ok]
    checks = [slo_checks(r, slos[r.request_class]) for r in rs]
    met = sum(1 for t, i in checks if t and i)
    kinds = Counter(r.error_kind for r in rs if not r.ok and not r.rejected)

    def per_s(x: float) -> float | None:
        return x / wall_s if wall_s > 0 else None

    return {
        "requests": len(rs),
        "completed": len(done),
        "rejected_429": sum(1 for r in rs if r.rejected),
        "errors": sum(kinds.values()),
        "error_kinds": {str(k): v for k, v in kinds.most_common()},
        "prompt_tokens": sum(r.prompt_tokens for r in done),
        "output_tokens": sum(r.output_tokens for r in done),
        "throughput": {
            "output_tokens_per_s": per_s(sum(r.output_tokens for r in done)),
            "requests_per_s": per_s(len(done)),
            "slo_goodput_rps": per_s(met),
        },
        "ttft_s": distribution([t for r in done if (t := r.ttft_s) is not None]),
        "itl_s": distribution([g for r in done for g in itl_gaps(r.token_times)]),
        "mean_itl_s": distribution([m for r in done if (m := mean_itl(r)) is not None]),
        "e2e_s": distribution([e for r in done if (e := r.e2e_s) is not None]),
        "slo": {
            "met": met,
            "attainment": met / len(rs) if rs else None,
            "ttft_met": sum(1 for t, _ in checks if t),
            "itl_met": sum(1 for _, i in checks if i),
        },
    }


def summarize_classes(
    records: Sequence[RequestRecord], slos: Mapping[str, Slo], wall_s: float
) -> dict[str, dict[str, Any]]:
    """{"interactive": ..., "batch": ..., "all": ...}, class summaries carrying their SLO."""
    out: dict[str, dict[str, Any]] = {}
    for c in CLASSES:
        out[c] = summarize((r for r in records if r.request_class == c), slos, wall_s)
        out[c]["slo"] = slos[c].to_json() | out[c]["slo"]
    out["all"] = summarize(records, slos, wall_s)
    return out


def send_lag(records: Sequence[RequestRecord]) -> dict[str, float | None]:
    """How late the generator sent requests against the schedule: an open-loop replay is
    only faithful while this stays small."""
    return distribution([r.sent_s - r.scheduled_s for r in records if r.sent_s is not None])
