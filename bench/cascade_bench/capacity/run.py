"""The capacity run: a curve on one instance, then 1 vs 2 instances at one concurrency.

1. Deploy the model with 1 replica (engine max batch >= anything sent to one worker).
2. Curve: for each batch size b, keep b requests in flight to that one worker's
   `/v1/generate` for warm-up + window; record tokens/s and per-token ITL. Then the
   prefill speed: `prefill_prompt_tokens`-token prompts with max_tokens 1, one at a
   time, prompt tokens over the median time to first token (the simulator's prefill
   rate; on a CPU a prefill token costs far less than a decode step's share). The
   curve's tokens/s then become decode speeds: the prefill time of the requests that
   started in each window, at that rate, is taken out of the window
   (`stats.without_prefill`; `raw_tokens_per_s` keeps the figure before).
3. Scaling concurrency C: `--concurrency`, or twice the curve's knee (the smallest b
   within 90% of the best throughput), so that C/2 per instance is already near
   saturation and the comparison measures capacity, not batching efficiency. C in
   flight to the one worker, then scale to 2 with the first node cordoned, wait Ready,
   check the two pods sit on two
   nodes, and C split evenly straight over both workers (no gateway: it runs unquota'd
   and would only add a hop and CPU on the shared cores). 'one' is measured before the
   scale-up so the new instance's weight transfer does not overlap it.
4. With `instances` N > 1: grow to N instances on N nodes and measure the curve again
   with every instance at b at once, and the prefill speed on one while the others run
   at the knee. Its per-instance figures become the profile (`curve`, `prefill`; the
   one-instance ones move to `one_instance`): on shared cores (the dev cluster's nodes
   are quotas on one host) N busy instances each serve less than one alone, and a
   simulator fed the idle figures is optimistic exactly when a deployment is at its peak.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cascade_bench.capacity.cluster import Deployment, Worker, deployment
from cascade_bench.capacity.load import Load, measure, prefill_ttfts
from cascade_bench.capacity.report import document
from cascade_bench.capacity.stats import (
    CurvePoint,
    knee,
    per_instance,
    prefill_point,
    ratio,
    split,
    without_prefill,
)


@dataclass(frozen=True)
class CapacityConfig:
    model_path: Path
    kubeconfig: Path
    batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    concurrency: int | None = None  # default: 2 x the curve's knee
    max_tokens: int = 64
    prompt_tokens: int = 16
    prefill_prompt_tokens: int = 512
    prefill_samples: int = 5
    warmup_s: float = 4.0
    duration_s: float = 12.0
    timeout_s: float = 300.0
    instances: int = 1  # > 1: the profile is measured with this many instances busy

    def load(self) -> Load:
        ids = tuple(4 + (i * 37) % 250 for i in range(self.prompt_tokens))
        return Load(ids, self.max_tokens, self.warmup_s, self.duration_s)


def run(cfg: CapacityConfig, say: Callable[[str], None] = print) -> dict[str, Any]:
    if not cfg.batches or min(cfg.batches) < 1:
        raise ValueError("--batches needs sizes >= 1")
    if cfg.instances < 1:
        raise ValueError("--instances must be >= 1")
    if not (cfg.model_path / "config.json").is_file():
        raise ValueError(f"--model-path {cfg.model_path}: no checkpoint (config.json) there")
    load = cfg.load()
    max_batch = cfg.concurrency or 2 * max(cfg.batches)
    max_batch = max(max_batch, max(cfg.batches))
    with deployment(cfg.kubeconfig) as d:
        say(f"{d.ns}: deploying {cfg.model_path} (1 replica, engine max batch {max_batch})")
        d.create(cfg.model_path, max_batch)
        first = d.wait_ready(1, cfg.timeout_s)[0]
        say(f"worker {first.pod} on {first.node} (node CPU {first.node_cpu})")
        curve: list[CurvePoint] = []
        for b in cfg.batches:
            point = asyncio.run(measure(b, [(first.generate_url, b)], load))
            say(f"  batch {b:>3}: {point.tokens_per_s:8.1f} tok/s, ITL p50 {point.itl_p50_s}")
            curve.append(point)
        prefill = _prefill(cfg, first, [], 0)
        say(f"  prefill {cfg.prefill_prompt_tokens} tokens: {prefill['tokens_per_s']:.0f} tok/s")
        curve = _decode_only(curve, cfg.prompt_tokens, prefill, say)
        conc = cfg.concurrency or 2 * knee(curve)
        one = asyncio.run(measure(conc, [(first.generate_url, conc)], load))
        say(f"1 instance, {conc} in flight: {one.tokens_per_s:.1f} tok/s; scaling to 2")
        workers = d.spread(2, cfg.timeout_s)  # the scheduler does not spread bare pods
        say(f"2 instances on {', '.join(w.node for w in workers)}")
        targets = [(w.generate_url, n) for w, n in zip(workers, split(conc, 2), strict=True)]
        two = asyncio.run(measure(conc, targets, load))
        say(f"2 instances, {conc} in flight: {two.tokens_per_s:.1f} tok/s")
        # The ratio on the curve's basis: decode speeds, each side's prefill taken out
        # at the measured rate (two instances prefill side by side).
        rate = prefill["tokens_per_s"]
        one = without_prefill(one, cfg.prompt_tokens, rate)
        two = without_prefill(two, cfg.prompt_tokens, rate, instances=2)
        one_instance = None
        if cfg.instances > 1:
            one_instance = {"curve": [asdict(p) for p in curve], "prefill": prefill}
            workers, curve, prefill = _at_scale(cfg, d, knee(curve), say)
    params = {k: v for k, v in asdict(cfg).items() if k not in ("model_path", "kubeconfig")}
    params["batches"] = list(cfg.batches)
    params["concurrency"] = conc
    params["engine_max_batch"] = max_batch
    params["nodes"] = [w.node for w in workers]
    return document(
        node_cpu=first.node_cpu,
        model=cfg.model_path.name,
        params=params,
        curve=curve,
        prefill=prefill,
        one=one,
        two=two,
        scaling_ratio=ratio(one.tokens_per_s, two.tokens_per_s),
        one_instance=one_instance,
    )


def _prefill(cfg: CapacityConfig, worker: Worker, others: list[Worker], batch: int) -> Any:
    """The prefill point on `worker` while each of `others` keeps `batch` in flight."""
    load = cfg.load()
    ids = load.prompt_token_ids * (cfg.prefill_prompt_tokens // cfg.prompt_tokens + 1)
    prompt = ids[: cfg.prefill_prompt_tokens]

    async def beside_load() -> list[float]:
        probe = prefill_ttfts(worker.generate_url, prompt, cfg.prefill_samples)
        if not others:
            return await probe
        busy = asyncio.create_task(measure(batch, [(w.generate_url, batch) for w in others], load))
        await asyncio.sleep(load.warmup_s)
        ttfts = await probe
        await busy
        return ttfts

    return prefill_point(cfg.prefill_prompt_tokens, asyncio.run(beside_load()))


def _at_scale(
    cfg: CapacityConfig, d: Deployment, background: int, say: Callable[[str], None]
) -> tuple[list[Worker], list[CurvePoint], dict[str, Any]]:
    """Step 4: the per-instance curve and prefill with `cfg.instances` instances busy."""
    n = cfg.instances
    workers = d.spread(n, cfg.timeout_s)
    say(f"{n} instances on {', '.join(w.node for w in workers)}: the curve with all busy")
    curve = []
    for b in cfg.batches:
        total = asyncio.run(measure(b, [(w.generate_url, b) for w in workers], cfg.load()))
        point = per_instance(total, n)
        say(f"  batch {b:>3} each: {point.tokens_per_s:8.1f} tok/s per instance")
        curve.append(point)
    prefill = _prefill(cfg, workers[0], workers[1:], background)
    rate = prefill["tokens_per_s"]
    say(f"  prefill beside {background} in flight on each other one: {rate:.0f} tok/s")
    return workers, _decode_only(curve, cfg.prompt_tokens, prefill, say), prefill


def _decode_only(
    curve: list[CurvePoint], prompt_tokens: int, prefill: dict[str, Any], say: Callable[[str], None]
) -> list[CurvePoint]:
    """The curve as decode speeds (`stats.without_prefill`), at the measured prefill rate.
    A point whose window went mostly to prefill is left out (said), not the whole run."""
    out = []
    for p in curve:
        try:
            out.append(without_prefill(p, prompt_tokens, prefill["tokens_per_s"]))
        except ValueError as exc:
            say(f"  left out of the profile: {exc}")
    if not out:
        raise ValueError("no batch size left a decode speed to measure: use --max-tokens")
    speeds = ", ".join(f"{p.batch}: {p.tokens_per_s:.0f}" for p in out)
    say(f"  decode tok/s without the replacements' prefill: {speeds}")
    return out
