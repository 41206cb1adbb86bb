"""LLMEngine: the `EngineCore` a worker serves -- schedule, execute, sample, stream.

One `step()` is one iteration of continuous batching: the scheduler picks sequences and
token counts (prefill chunks and decodes mixed), the executor runs them through every
layer (in-process stages today, a pipeline of processes later) and returns the logits
of each sequence's last new token, and every sequence that reached its end gets one
sampled token, the stop rules applied and a chunk streamed.

Preemption and mode switches cost recompute, never correctness: a sequence whose cache
was dropped is prefilled again over prompt + generated tokens (`recompute`), and
`replace_executor` swaps the execution layout (e.g. a pipeline member that now holds
the whole model) by recomputing every sequence against the new executor's cache. A
stream resumed from another instance (`GenerateRequest.resume`) takes the same path:
it is admitted with its tokens so far and prefilled over all of them.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch

from cascade_protocol.generate import FinishReason, GenerateChunk, GenerateRequest
from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.core import EngineStats, RequestRejected
from cascade_worker.engine.executor import Executor, LocalExecutor
from cascade_worker.engine.generation_config import GenerationConfig
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.requests import EngineRequest, prepare_prompt, text_to_ids
from cascade_worker.engine.sampling import sample
from cascade_worker.engine.scheduler import (
    DEFAULT_MAX_BATCH,
    DEFAULT_PREFILL_BUDGET,
    Scheduler,
    SchedulerOutput,
)
from cascade_worker.engine.sizing import DEFAULT_BLOCK_SIZE, context_length
from cascade_worker.engine.startup import StartupOptions, StartupReport, build_local
from cascade_worker.engine.tokenizer import EngineTokenizer

log = logging.getLogger(__name__)


class LLMEngine:
    def __init__(
        self,
        config: ModelConfig,
        executor: Executor,
        tokenizer: EngineTokenizer | None,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_model_len: int | None = None,
        prefill_budget: int = DEFAULT_PREFILL_BUDGET,
        generation: GenerationConfig | None = None,
    ) -> None:
        self.config = config
        self.executor = executor
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len or config.max_position_embeddings
        limit = config.max_position_embeddings
        if not 1 < self.max_model_len <= limit:
            raise ValueError(
                f"max_model_len: {self.max_model_len} is outside 2..{limit} "
                "(the model's max_position_embeddings)"
            )
        self._check_cache(executor.cache)
        self.scheduler = Scheduler(
            executor.cache, max_batch=max_batch, prefill_budget=prefill_budget
        )
        self.generation = generation or GenerationConfig()
        eos = {*config.eos_token_ids, *self.generation.eos_token_ids}
        if tokenizer is not None and tokenizer.eos_token_id is not None:
            eos.add(tokenizer.eos_token_id)
        self.eos_ids = frozenset(eos)
        self._requests: dict[str, EngineRequest] = {}
        self._by_seq: dict[int, EngineRequest] = {}
        self._pending: list[GenerateChunk] = []  # abort chunks, sent by the next step()
        self._next_seq = 0
        self.num_preemptions = 0  # sequences sent back for recompute (a metric)
        self.last_prefill_tokens = 0  # prompt tokens the last step prefilled (EngineStats)
        self.last_step_s = 0.0  # its compute time (step_clock)
        self.startup: StartupReport | None = None  # what from_store's start-up did
        # In-process stages on the CPU: CPU-clock steps. A pipeline waits on remote stages
        # within its step, which only wall time sees.
        self._cpu = isinstance(executor, LocalExecutor) and all(
            torch.device(s.device).type == "cpu" for s in executor.stages
        )

    @classmethod
    def from_store(
        cls,
        store: BlockStore,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_model_len: int | None = None,
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        kv_cache_tokens: int | None = None,
        prefill_budget: int = DEFAULT_PREFILL_BUDGET,
        cuts: tuple[int, ...] = (),
        **startup: Any,
    ) -> LLMEngine:
        """Whole model in this process, as one stage or split at layer `cuts`; context
        sized by engine/sizing.py, the KV cache by profiling against a memory budget
        unless `kv_cache_tokens` or a recorded `kv_sizing` is given, compiled with
        `compile=True`: `startup` are StartupOptions' fields (engine/startup.py)."""
        config = ModelConfig.from_hf(store.manifest.config)
        max_model_len = context_length(config, max_model_len)
        opts = StartupOptions(block_size=block_size, kv_cache_tokens=kv_cache_tokens, **startup)
        executor, report = build_local(
            store, config, opts, max_batch=max_batch, max_model_len=max_model_len,
            prefill_budget=prefill_budget, device=device, dtype=dtype, cuts=cuts,
        )  # fmt: skip
        extras = store.manifest.extras
        engine = cls(
            config,
            executor,
            EngineTokenizer.from_extras(extras),
            max_batch=max_batch,
            max_model_len=max_model_len,
            prefill_budget=prefill_budget,
            generation=GenerationConfig.from_extras(extras),
        )
        engine.startup = report
        return engine

    @classmethod
    def from_model_dir(cls, model_dir: Path, **kwargs: Any) -> LLMEngine:
        """Pack an HF checkpoint directory in memory and serve it (see from_store)."""
        return cls.from_store(BlockStore.from_model_dir(Path(model_dir), 1), **kwargs)

    # -- knobs and views ----------------------------------------------------------------

    @property
    def max_batch(self) -> int:
        return self.scheduler.max_batch

    @max_batch.setter
    def max_batch(self, value: int) -> None:
        self.scheduler.max_batch = value

    def set_max_batch(self, value: int) -> None:
        """The running batch's bound from the next step (the local autoscaler turns it;
        the serving layer calls it on the engine thread). Lowering it stops admissions
        until the running set falls under it; it never cuts running sequences."""
        self.scheduler.max_batch = value

    def stats(self) -> EngineStats:
        return EngineStats(
            waiting=self.scheduler.num_waiting,
            running=self.scheduler.num_running,
            max_batch=self.scheduler.max_batch,
            kv_cache_usage=self.scheduler.kv_usage,
            max_model_len=self.max_model_len,
            max_token_bytes=self.tokenizer.max_token_bytes if self.tokenizer else 0,
            prefill_tokens=self.last_prefill_tokens,
            step_s=self.last_step_s,
        )

    def has_work(self) -> bool:
        return bool(self._requests or self._pending)

    # -- requests -----------------------------------------------------------------------

    def tokenize(self, request: GenerateRequest) -> GenerateRequest:
        return text_to_ids(request, self.tokenizer, self.max_model_len)

    def add_request(self, request: GenerateRequest) -> None:
        if request.request_id in self._requests:
            raise RequestRejected(
                f"request {request.request_id!r} is already running", "request_id"
            )
        params = self.generation.apply(request.params)
        if params is not request.params:
            request = request.model_copy(update={"params": params})
        prompt = prepare_prompt(request, self.tokenizer, self.config.vocab, self.max_model_len)
        seq_id, self._next_seq = self._next_seq, self._next_seq + 1
        req = EngineRequest.create(
            request, seq_id, prompt, self.tokenizer, self.eos_ids, self.max_model_len
        )
        self._requests[request.request_id] = req
        self._by_seq[seq_id] = req
        # A resumed request's tokens so far are prefilled with its prompt (recompute).
        self.scheduler.add(seq_id, req.num_tokens, request.request_class)

    def abort_request(self, request_id: str) -> None:
        req = self._requests.get(request_id)
        if req is None:
            return
        req.finish_reason = FinishReason.ABORT
        self._pending.append(req.chunk([]))
        self._drop(req)

    def recompute(self, request_id: str) -> None:
        """Drop a request's KV cache; it is rebuilt from its tokens when next scheduled.
        No-op for an unknown (or finished) request."""
        req = self._requests.get(request_id)
        if req is not None:
            self.scheduler.recompute(req.seq_id)

    def replace_executor(self, executor: Executor) -> None:
        """Run on another executor from the next step; every sequence is recomputed."""
        self._check_cache(executor.cache)
        self.scheduler.reset_cache(executor.cache)
        self.executor = executor

    # -- the loop -----------------------------------------------------------------------

    def step_clock(self) -> float:
        """The clock a step's compute time is read on: on one CPU thread, that thread's
        CPU time, so a CFS quota's pauses and a neighbour's time slices (the dev
        cluster's nodes) do not count as the step's; wall time otherwise (an accelerator,
        or intra-op threads the calling thread's CPU time would miss)."""
        if self._cpu and torch.get_num_threads() == 1:
            return time.thread_time()
        return time.monotonic()

    def step(self) -> list[GenerateChunk]:
        began = self.step_clock()
        try:
            return self._step()
        finally:
            self.last_step_s = self.step_clock() - began

    def _step(self) -> list[GenerateChunk]:
        chunks, self._pending = self._pending, []
        out = self.scheduler.schedule()
        self.last_prefill_tokens = out.num_prefill_tokens
        self.num_preemptions += len(out.preempted)
        if out.is_empty:
            return chunks
        reqs = [self._by_seq[s.seq_id] for s in out.scheduled]
        try:
            logits = self.executor.execute(self._batch(out, reqs))
            rows = [i for i, s in enumerate(out.scheduled) if s.sample]
            tokens = sample(logits[rows], [reqs[i].sampler for i in rows]) if rows else []
        except Exception as exc:  # fail this step's requests, keep serving the others
            log.exception("engine step failed")
            for req in reqs:
                req.finish_reason = FinishReason.ERROR
                chunks.append(req.chunk([], error=f"engine step failed: {exc}"))
                self._drop(req)
            return chunks
        for i, token in zip(rows, tokens, strict=True):
            req = reqs[i]
            self.scheduler.append_token(req.seq_id)
            chunks.append(req.accept(token))
            if req.finish_reason is not None:
                self._drop(req)
        return chunks

    def _batch(self, out: SchedulerOutput, reqs: list[EngineRequest]) -> StageBatch:
        ids: list[int] = []
        for s, req in zip(out.scheduled, reqs, strict=True):
            ids += req.token_ids(s.start, s.start + s.num_new)
        return StageBatch(
            seq_ids=[s.seq_id for s in out.scheduled],
            start_positions=[s.start for s in out.scheduled],
            num_new=[s.num_new for s in out.scheduled],
            block_tables=[list(s.block_table) for s in out.scheduled],
            input=torch.tensor(ids, dtype=torch.int64),
        )

    def _drop(self, req: EngineRequest) -> None:
        self.scheduler.finish(req.seq_id)
        self._requests.pop(req.request_id, None)
        self._by_seq.pop(req.seq_id, None)

    def _check_cache(self, cache: CacheConfig) -> None:
        if cache.capacity_tokens < self.max_model_len:
            raise ValueError(
                f"the KV cache holds {cache.capacity_tokens} tokens, fewer than one full "
                f"context ({self.max_model_len}); lower max_model_len or grow the cache"
            )
