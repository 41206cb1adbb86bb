"""The head of a pipeline: an LLMEngine whose executor is a `PipelineExecutor`.

`head_engine(store, end, stages)` builds it from a `BlockStore` holding (at least) the
blocks of layers [0, end), as a worker does; the process entry point drives one with
synthetic greedy requests and prints what it generated and how fast:

    python -m cascade_worker.pipeline.head --model-dir DIR --layers 0:A \\
        [--stages HOST:PORT,HOST:PORT ...] [--requests 8] [--prompt-tokens 32] \\
        [--max-tokens 32] [--max-batch 8] [--micro-batches M] [--threads N] [--json OUT]

Without --stages the head runs the whole model (--layers 0:L): the one-process baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cascade_protocol.generate import GenerateRequest, SamplingParams
from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.generation_config import GenerationConfig
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.kv_cache import KVCache
from cascade_worker.engine.scheduler import DEFAULT_MAX_BATCH, DEFAULT_PREFILL_BUDGET
from cascade_worker.engine.sizing import DEFAULT_BLOCK_SIZE, cache_config, context_length
from cascade_worker.engine.stage import StageModel
from cascade_worker.engine.tokenizer import EngineTokenizer
from cascade_worker.engine.weights import compute_dtype
from cascade_worker.pipeline.attach import AttachedStages, attach_stages
from cascade_worker.pipeline.cooperative import CooperativeExecutor
from cascade_worker.pipeline.executor import DEFAULT_MIN_MICRO_BATCH_TOKENS, PipelineExecutor
from cascade_worker.pipeline.splits import SplitPolicy
from cascade_worker.pipeline.stage_process import parse_layers
from cascade_worker.transport.env import stop_notifier, use_notifier_thread

log = logging.getLogger(__name__)


@dataclass
class PreparedHead:
    """What a head needs besides its weights, made ahead (a live scale-up's head does
    this while its blocks arrive, attach.py): cache geometry, KV cache, attached stages."""

    config: ModelConfig
    max_model_len: int
    cache: CacheConfig
    kv: KVCache
    attached: AttachedStages | None
    seconds: float  # how long preparing took

    def close(self) -> None:
        """Detach the stages if no engine took them (blocking)."""
        if self.attached is not None:
            self.attached.close()


def prepare_head(
    hf_config: dict[str, Any],
    end: int,
    stages: Sequence[str],
    *,
    max_batch: int = DEFAULT_MAX_BATCH,
    max_model_len: int | None = None,
    kv_cache_tokens: int | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    connect_timeout_s: float = 10.0,
    device: str = "cpu",
    dtype: torch.dtype | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    cooperative: bool = False,
) -> PreparedHead:
    """Size and allocate the head's KV cache of layers [0, end) and attach `stages`
    (blocking). Context and KV cache are sized as for a one-process engine
    (engine/sizing.py): the stages copy the head's cache geometry, and so does the
    whole model after a switch to local execution. `cooperative`: the KV cache has room
    for every layer, which the head may grow into (cooperative.py)."""
    start = time.perf_counter()
    config = ModelConfig.from_hf(hf_config)
    max_model_len = context_length(config, max_model_len)
    cache = cache_config(
        config, max_batch=max_batch, max_model_len=max_model_len, block_size=block_size,
        kv_cache_tokens=kv_cache_tokens, device=device, dtype=dtype,
    )  # fmt: skip
    torch_device = torch.device(device)
    kv = KVCache(
        config.num_layers if cooperative else end, cache, config.kv_heads, config.head_dim,
        dtype=dtype or compute_dtype(config, torch_device), device=torch_device,
    )  # fmt: skip
    attached = None
    if stages:
        attached = attach_stages(
            config, cache, torch_device, stages, end, connect_timeout_s=connect_timeout_s, loop=loop
        )
    return PreparedHead(config, max_model_len, cache, kv, attached, time.perf_counter() - start)


def head_engine(
    store: BlockStore,
    end: int,
    stages: Sequence[str],
    *,
    max_batch: int = DEFAULT_MAX_BATCH,
    max_model_len: int | None = None,
    prefill_budget: int = DEFAULT_PREFILL_BUDGET,
    kv_cache_tokens: int | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    micro_batches: int | None = None,
    min_micro_batch_tokens: int = DEFAULT_MIN_MICRO_BATCH_TOKENS,
    step_timeout_s: float = 30.0,
    device: str = "cpu",
    dtype: torch.dtype | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    prepared: PreparedHead | None = None,
    splits: SplitPolicy | None = None,
) -> tuple[LLMEngine, PipelineExecutor]:
    """An engine running layers [0, end) here and the rest on `stages`, in order; over
    `prepared` (prepare_head, made with the same arguments) when given. With `splits`
    the one stage is a cooperating source and the head grows (cooperative.py)."""
    if prepared is None:
        prepared = prepare_head(
            store.manifest.config, end, stages, max_batch=max_batch, max_model_len=max_model_len,
            kv_cache_tokens=kv_cache_tokens, block_size=block_size, device=device, dtype=dtype,
            loop=loop, cooperative=splits is not None,
        )  # fmt: skip
    config, cache = prepared.config, prepared.cache
    t0 = time.perf_counter()
    try:
        head = StageModel.load(
            store, config, 0, end, cache, device=device, dtype=dtype, kv=prepared.kv
        )
        executor = (
            PipelineExecutor(
                head, prepared.attached, micro_batches=micro_batches,
                min_micro_batch_tokens=min_micro_batch_tokens, step_timeout_s=step_timeout_s,
            )
            if splits is None or prepared.attached is None
            else CooperativeExecutor(head, prepared.attached, splits, step_timeout_s=step_timeout_s)
        )  # fmt: skip
        engine = LLMEngine(
            config,
            executor,
            EngineTokenizer.from_extras(store.manifest.extras),
            max_batch=max_batch,
            max_model_len=prepared.max_model_len,
            prefill_budget=prefill_budget,
            generation=GenerationConfig.from_extras(store.manifest.extras),
        )
    except Exception:
        prepared.close()
        raise
    log.info(
        "head over %d stage(s): prepared (KV cache, stages attached) in %.3f s, then "
        "layers [0, %d) and engine in %.3f s", len(stages), prepared.seconds, end,
        time.perf_counter() - t0,
    )  # fmt: skip
    return engine, executor


def synthetic_requests(
    count: int, prompt_tokens: int, max_tokens: int, vocab: int, seed: int = 0
) -> list[GenerateRequest]:
    """Greedy requests with random prompts of prompt_tokens/2 .. prompt_tokens tokens."""
    rng = random.Random(seed)
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    return [
        GenerateRequest(
            request_id=f"r{i}",
            prompt_token_ids=[
                rng.randrange(4, vocab)
                for _ in range(rng.randint(prompt_tokens // 2 or 1, prompt_tokens))
            ],
            params=params,
        )
        for i in range(count)
    ]


def generate(engine: LLMEngine, requests: Sequence[GenerateRequest]) -> dict[str, Any]:
    """Run `requests` to completion; tokens, errors and throughput."""
    for req in requests:
        engine.add_request(req)
    outputs: dict[str, list[int]] = {r.request_id: [] for r in requests}
    errors: dict[str, str] = {}
    start = time.perf_counter()
    steps = 0
    while engine.has_work():
        steps += 1
        for chunk in engine.step():
            outputs[chunk.request_id] += chunk.token_ids
            if chunk.error:
                errors[chunk.request_id] = chunk.error
    seconds = time.perf_counter() - start
    tokens = sum(len(t) for t in outputs.values())
    return {
        "requests": len(requests),
        "tokens": tokens,
        "steps": steps,
        "seconds": round(seconds, 4),
        "tokens_per_s": round(tokens / seconds, 1) if seconds else 0.0,
        "outputs": outputs,
        "errors": errors,
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cascade_worker.pipeline.head")
    p.add_argument("--model-dir", type=Path, required=True)
    p.add_argument("--layers", type=parse_layers, required=True, help="0:A, the head's layers")
    p.add_argument("--stages", default="", help="comma-separated HOST:PORT, in layer order")
    p.add_argument("--requests", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--micro-batches", type=int, default=None, help="default: stages")
    p.add_argument("--min-micro-batch-tokens", type=int, default=DEFAULT_MIN_MICRO_BATCH_TOKENS)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--json", type=Path, default=None, help="also write the report here")
    p.add_argument("--log-level", default=os.environ.get("CASCADE_LOG_LEVEL", "WARNING"))
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    use_notifier_thread()
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.layers[0] != 0:
        raise SystemExit("the head's layers start at 0")
    stages = [s for s in args.stages.split(",") if s]
    store = BlockStore.from_model_dir(args.model_dir, 1)
    try:
        engine, executor = head_engine(
            store,
            args.layers[1],
            stages,
            max_batch=args.max_batch,
            max_model_len=args.prompt_tokens + args.max_tokens + 1,
            micro_batches=args.micro_batches,
            min_micro_batch_tokens=args.min_micro_batch_tokens,
        )
        try:
            requests = synthetic_requests(
                args.requests, args.prompt_tokens, args.max_tokens, engine.config.vocab
            )
            report = {"stages": len(stages) + 1, **generate(engine, requests)}
        finally:
            executor.close()
    finally:
        stop_notifier()
    text = json.dumps(report)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
