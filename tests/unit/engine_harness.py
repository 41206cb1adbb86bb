"""Shared helpers of the engine tests: tiny float32 checkpoints, their tensors read back,
and a drive-to-done loop."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from cascade_protocol.generate import GenerateChunk, GenerateRequest, SamplingParams
from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec
from cascade_worker.engine.engine import LLMEngine


def checkpoint_tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint in `model_dir`, by name, across its shards."""
    out: dict[str, torch.Tensor] = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        out.update(load_file(str(path)))
    return out


WINDOW = 8  # Mistral's sliding window in the tests: shorter than the prompts
PROMPTS = [
    "Hello world, this is a test of the engine",
    "The quick brown fox",
    "a",
    "Numbers: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15",
]


def make_model(out: Path, arch: str = "llama", *, seed: int = 1, layers: int = 4) -> Path:
    spec = ModelSpec(
        arch=arch,
        layers=layers,
        hidden=64,
        heads=4,
        kv_heads=2,
        intermediate=128,
        vocab=512,
        max_positions=256,
        dtype="float32",
        seed=seed,
    )
    write_checkpoint(out, spec)
    if arch == "mistral":
        path = out / "config.json"
        config = json.loads(path.read_text())
        config["sliding_window"] = WINDOW
        path.write_text(json.dumps(config))
    return out


def greedy(max_tokens: int = 24, **kw: object) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **kw)  # type: ignore[arg-type]


def request(rid: str, prompt: str | list[int], params: SamplingParams) -> GenerateRequest:
    if isinstance(prompt, str):
        return GenerateRequest(request_id=rid, prompt=prompt, params=params)
    return GenerateRequest(request_id=rid, prompt_token_ids=prompt, params=params)


def drain(engine: LLMEngine, max_steps: int = 1000) -> dict[str, list[GenerateChunk]]:
    """Step until idle; chunks per request id."""
    out: dict[str, list[GenerateChunk]] = {}
    for _ in range(max_steps):
        if not engine.has_work():
            return out
        for chunk in engine.step():
            out.setdefault(chunk.request_id, []).append(chunk)
    raise AssertionError("engine did not finish")


def token_ids(chunks: list[GenerateChunk]) -> list[int]:
    return [t for c in chunks for t in c.token_ids]


def text(chunks: list[GenerateChunk]) -> str:
    return "".join(c.text for c in chunks)
