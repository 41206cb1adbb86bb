"""The capacity run: a curve on one instance, then 1 vs 2 instances at one concurrency.

1. Deploy the model with 1 replica (engine max batch >= anything sent to one worker).
2. Curve: for each batch size b, keep b requests in flight to that one worker's
   `/v1/generate` for warm-up + window; record tokens/s and per-token ITL. Then the
   prefill speed: `prefill_prompt_tokens`-token prompts with max_tokens 1, one at a
   time, prompt tokens over the median time to first token (the simulator's prefill
   rate; on a CPU a prefill token costs far less than a decode step's share).
3. Scaling concurrency C: `--concurrency`, or twice the curve's knee (the smallest b
   within 90% of the best throughput), so that C/2 per instance is already near
   saturation and the comparison measures capacity, not batching efficiency. C in
   flight to the one worker, then scale to 2 with the first node cordoned, wait Ready,
   check the two pods sit on two
   nodes, and C split evenly straight over both workers (no gateway: it runs unquota'd
   and would only add a hop and CPU on the shared cores). 'one' is measured before the
   scale-up so the new instance's weight transfer does not overlap it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cascade_bench.capacity.cluster import deployment
from cascade_bench.capacity.load import Load, measure, prefill_ttfts
from cascade_bench.capacity.report import document
from cascade_bench.capacity.stats import CurvePoint, knee, prefill_point, ratio, split


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

    def load(self) -> Load:
        ids = tuple(4 + (i * 37) % 250 for i in range(self.prompt_tokens))
        return Load(ids, self.max_tokens, self.warmup_s, self.duration_s)


def run(cfg: CapacityConfig, say: Callable[[str], None] = print) -> dict[str, Any]:
    if not cfg.batches or min(cfg.batches) < 1:
        raise ValueError("--batches needs sizes >= 1")
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
        ids = cfg.load().prompt_token_ids * (cfg.prefill_prompt_tokens // cfg.prompt_tokens + 1)
        ttfts = asyncio.run(
            prefill_ttfts(first.generate_url, ids[: cfg.prefill_prompt_tokens], cfg.prefill_samples)
        )
        prefill = prefill_point(cfg.prefill_prompt_tokens, ttfts)
        say(f"  prefill {cfg.prefill_prompt_tokens} tokens: {prefill['tokens_per_s']:.0f} tok/s")
        conc = cfg.concurrency or 2 * knee(curve)
        one = asyncio.run(measure(conc, [(first.generate_url, conc)], load))
        say(f"1 instance, {conc} in flight: {one.tokens_per_s:.1f} tok/s; scaling to 2")
        with d.cordoned(first.node):  # the scheduler does not spread bare pods
            d.scale(2)
            workers = d.wait_ready(2, cfg.timeout_s)[:2]
        if len({w.node for w in workers}) < 2:
            raise RuntimeError(f"both instances landed on {workers[0].node}: no extra quota")
        say(f"2 instances on {', '.join(w.node for w in workers)}")
        targets = [(w.generate_url, n) for w, n in zip(workers, split(conc, 2), strict=True)]
        two = asyncio.run(measure(conc, targets, load))
        say(f"2 instances, {conc} in flight: {two.tokens_per_s:.1f} tok/s")
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
    )
