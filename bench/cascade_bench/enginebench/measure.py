"""Steady-state throughput of one path (engine eager/compiled, transformers generate).

Every figure is one timed run on a warm path; `run.py` interleaves paths per round and
takes medians. The clock is the calling thread's CPU time when torch runs one thread on
the CPU (a neighbour's time slices on a shared machine do not count), wall time
otherwise; on CUDA every reading waits for the device first.
- decode: b sequences of DECODE_PROMPT tokens prefilled first (untimed for the engine),
  then `new` greedy tokens each; tokens/s = b x (new - 1) decoded / time. transformers:
  generate(new) - generate(1), i.e. the same decode steps inside `generate`.
- prefill: one prompt of p tokens, one step (prefill + the first token); p / time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from cascade_protocol.generate import GenerateRequest, SamplingParams
from cascade_worker.engine.engine import LLMEngine

DECODE_PROMPT = 16
_GREEDY: dict[str, Any] = {"do_sample": False, "eos_token_id": None, "pad_token_id": 3}


def clock(device: torch.device) -> Callable[[], float]:
    if device.type == "cuda":

        def synced() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()

        return synced
    return time.thread_time if torch.get_num_threads() == 1 else time.perf_counter


def engine_device(engine: LLMEngine) -> torch.device:
    return torch.device(engine.executor.stages[0].device)  # type: ignore[attr-defined]


def prompt_ids(batch: int, length: int, vocab: int) -> list[list[int]]:
    return [[4 + (i * 7919 + j * 31) % (vocab - 4) for j in range(length)] for i in range(batch)]


def _add(engine: LLMEngine, prompts: list[list[int]], new: int) -> None:
    for i, ids in enumerate(prompts):
        params = SamplingParams(max_tokens=new, temperature=0.0, ignore_eos=True)
        engine.add_request(GenerateRequest(request_id=f"r{i}", prompt_token_ids=ids, params=params))


def engine_decode(engine: LLMEngine, batch: int, new: int) -> float:
    _add(engine, prompt_ids(batch, DECODE_PROMPT, engine.config.vocab), new)
    engine.step()  # every prompt prefilled (batch x 16 tokens fit one step's budget)
    now = clock(engine_device(engine))
    began, tokens = now(), 0
    while engine.has_work():
        tokens += sum(len(c.token_ids) for c in engine.step())
    return tokens / (now() - began)


def engine_prefill(engine: LLMEngine, prompt: int) -> float:
    _add(engine, prompt_ids(1, prompt, engine.config.vocab), 1)
    now = clock(engine_device(engine))
    began = now()
    engine.step()
    took = now() - began
    if engine.has_work():
        raise RuntimeError(f"a {prompt}-token prompt did not prefill in one step")
    return prompt / took


def hf_decode(model: Any, batch: int, new: int, vocab: int) -> float:
    ids = torch.tensor(prompt_ids(batch, DECODE_PROMPT, vocab), device=model.device)
    mask = torch.ones_like(ids)  # explicit: generate would mask prompt tokens equal to the pad
    now = clock(model.device)
    with torch.inference_mode():
        began = now()
        model.generate(ids, max_new_tokens=1, **_GREEDY, attention_mask=mask)
        first = now() - began
        began = now()
        model.generate(ids, max_new_tokens=new, **_GREEDY, attention_mask=mask)
        full = now() - began
    return batch * (new - 1) / max(full - first, 1e-9)


def hf_prefill(model: Any, prompt: int, vocab: int) -> float:
    ids = torch.tensor(prompt_ids(1, prompt, vocab), device=model.device)
    now = clock(model.device)
    with torch.inference_mode():
        began = now()
        model(ids, use_cache=True)
        return prompt / (now() - began)
