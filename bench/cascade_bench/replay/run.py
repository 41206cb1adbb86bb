"""One replay from flags to JSON document: load, scale, (send), summarize.

The CLI builds a `ReplayConfig` and calls `dry_run` or `run`; both return the JSON
document that `report` renders. The progress bar lives here, on stderr, updated as each
request finishes, so the pure modules stay free of I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_bench.replay.client import ClientOptions, ReplayResult, first_model, replay
from cascade_bench.replay.metrics import (
    DEFAULT_SLOS,
    Slo,
    distribution,
    send_lag,
    summarize_classes,
)
from cascade_bench.replay.prompts import TokenRange
from cascade_bench.replay.record import RequestRecord
from cascade_bench.replay.scale import CLASSES, Planned, Scaling, describe, schedule
from cascade_bench.replay.trace import Trace, load_trace


@dataclass(frozen=True)
class ReplayConfig:
    trace: Path
    url: str
    model: str | None = None  # None: the first model of /v1/models
    scaling: Scaling = field(default_factory=Scaling)
    token_range: TokenRange = field(default_factory=TokenRange)
    class_via: str = "body"
    timeout_s: float = 600.0
    retry_429: int = 0
    slos: Mapping[str, Slo] = field(default_factory=lambda: dict(DEFAULT_SLOS))
    progress: bool = True
    per_request: bool = False  # include one row per request in the JSON


def _head(cfg: ReplayConfig, trace: Trace, plan: Sequence[Planned]) -> dict[str, Any]:
    return {
        "benchmark": "replay",
        "trace": {
            "path": str(cfg.trace),
            "name": cfg.trace.name,
            "requests": len(trace.rows),
            "span_s": trace.span_s,
        },
        "scaling": describe(trace, cfg.scaling, plan),
        "slo": {c: cfg.slos[c].to_json() for c in CLASSES},
        "requests": len(plan),
    }


def schedule_stats(plan: Sequence[Planned]) -> dict[str, Any]:
    """What the load looks like: arrivals per replay second and sent token counts."""
    per_s = Counter(math.floor(p.at_s) for p in plan)
    seconds = math.floor(max((p.at_s for p in plan), default=0.0)) + 1
    return {
        "arrivals_per_s": {
            "mean": len(plan) / seconds if plan else None,
            "max": max(per_s.values(), default=0),
        },
        "prompt_tokens": distribution([float(p.prompt_tokens) for p in plan]),
        "output_tokens": distribution([float(p.output_tokens) for p in plan]),
    }


def dry_run(cfg: ReplayConfig) -> dict[str, Any]:
    """The document of a replay that sends nothing: scaling and schedule only."""
    trace = load_trace(cfg.trace)
    plan = schedule(trace, cfg.scaling)
    doc = _head(cfg, trace, plan)
    doc["dry_run"] = True
    doc["schedule"] = schedule_stats(plan)
    return doc


def result_doc(
    cfg: ReplayConfig, trace: Trace, plan: Sequence[Planned], model: str, res: ReplayResult
) -> dict[str, Any]:
    """The full document of a finished (or interrupted) replay."""
    doc = _head(cfg, trace, plan)
    doc["target"] = {
        "url": cfg.url,
        "model": model,
        "class_via": cfg.class_via,
        "token_range": [cfg.token_range.low, cfg.token_range.high],
        "timeout_s": cfg.timeout_s,
        "retry_429": cfg.retry_429,
    }
    doc["sent"] = sum(1 for r in res.records if r.sent_s is not None)
    doc["wall_s"] = res.wall_s
    doc["interrupted"] = res.interrupted
    doc["send_lag_s"] = send_lag(res.records)
    doc["classes"] = summarize_classes(res.records, cfg.slos, res.wall_s)
    if cfg.per_request:
        doc["records"] = [r.to_json() for r in res.records]
    return doc


async def run(cfg: ReplayConfig) -> dict[str, Any]:
    """Replay the trace against the gateway; returns the result document."""
    trace = load_trace(cfg.trace)
    plan = schedule(trace, cfg.scaling)
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    assert me is not None
    # SIGTERM like Ctrl-C: stop sending, keep what was measured (main thread only).
    with contextlib.suppress(RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, me.cancel)
    try:
        return await _run(cfg, trace, plan)
    finally:
        with contextlib.suppress(RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)


async def _run(cfg: ReplayConfig, trace: Trace, plan: Sequence[Planned]) -> dict[str, Any]:
    model = cfg.model or await first_model(cfg.url)
    opts = ClientOptions(
        url=cfg.url,
        model=model,
        token_range=cfg.token_range,
        seed=cfg.scaling.seed,
        class_via=cfg.class_via,
        timeout_s=cfg.timeout_s,
        retry_429=cfg.retry_429,
    )
    from tqdm import tqdm  # only the sending path draws a bar

    with tqdm(
        total=len(plan), unit="req", desc="replay", disable=not cfg.progress, dynamic_ncols=True
    ) as bar:
        tally = Counter[str]()

        def done(rec: RequestRecord) -> None:
            tally["429" if rec.rejected else "ok" if rec.ok else "err"] += 1
            bar.set_postfix(tally, refresh=False)
            bar.update(1)

        res = await replay(plan, opts, done)
    return result_doc(cfg, trace, plan, model, res)


def run_sync(cfg: ReplayConfig) -> dict[str, Any]:
    """`run` in a fresh event loop; a stop before sending began is a KeyboardInterrupt."""
    try:
        return asyncio.run(run(cfg))
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
