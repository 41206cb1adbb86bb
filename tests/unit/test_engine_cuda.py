"""The engine on a CUDA device (`make test-gpu`, marker `gpu`; skipped without one).

bfloat16 logits beside transformers' on the same GPU, for llama, qwen2 and mistral;
float32 greedy tokens on the GPU equal the CPU's; a decode step and a prefill step ask
the host to wait for the device nowhere (CUDA's sync debug mode); the KV cache is sized
from the device's free memory; the batched sampler on the device draws what it draws on
the CPU."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_harness import PROMPTS, drain, greedy, make_model, request, token_ids

from cascade_protocol.generate import SamplingParams
from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.executor import LocalExecutor
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.sampling import SamplerState, sample

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
os.environ["HF_HUB_OFFLINE"] = "1"
CUDA = torch.device("cuda")


@pytest.fixture(scope="module", params=["llama", "qwen2", "mistral"])
def arch_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return request.param, make_model(tmp_path_factory.mktemp(request.param), request.param)


def _executor(path: Path, device: torch.device, dtype: torch.dtype | None = None) -> Any:
    store = BlockStore.from_model_dir(path, 3)
    config = ModelConfig.from_hf(store.manifest.config)
    cache = CacheConfig(block_size=4, num_blocks=64)
    return LocalExecutor.load(store, config, cache, device=device, dtype=dtype)


def _prefill(ids: list[int]) -> StageBatch:
    table = list(range(3, 3 + (len(ids) + 3) // 4))
    return StageBatch([0], [0], [len(ids)], [table], torch.tensor(ids), all_logits=True)


def test_bf16_logits_match_transformers_on_the_same_gpu(arch_dir: Any) -> None:
    transformers = pytest.importorskip("transformers")
    arch, path = arch_dir
    tok = transformers.AutoTokenizer.from_pretrained(path)
    ids = tok(PROMPTS[3])["input_ids"]
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    hf = hf.to(CUDA).eval()
    with torch.no_grad():
        want = hf(torch.tensor([ids], device=CUDA)).logits[0].float()
    executor = _executor(path, CUDA)
    assert executor.stages[0].dtype == torch.bfloat16  # the CUDA default
    got = executor.execute(_prefill(ids))
    assert got.device.type == "cuda"
    err = (got - want).abs().max().item() / want.abs().max().item()
    cos = torch.nn.functional.cosine_similarity(got, want, dim=-1).min().item()
    print(f"{arch}: max |diff| / max |logit| {err:.4f}, min cosine {cos:.5f}")
    assert err < 0.05 and cos > 0.995


def test_float32_greedy_tokens_on_the_gpu_equal_the_cpus(model_dir: Path) -> None:
    out = {}
    for device in ("cpu", "cuda"):
        engine = LLMEngine.from_model_dir(
            model_dir, max_batch=4, kv_cache_tokens=1024, device=device, dtype=torch.float32
        )
        for i, prompt in enumerate(PROMPTS):
            engine.add_request(request(f"r{i}", prompt, greedy(16)))
        out[device] = {rid: token_ids(c) for rid, c in drain(engine).items()}
    assert out["cuda"] == out["cpu"]


def test_a_step_never_waits_for_the_device(model_dir: Path) -> None:
    executor = _executor(model_dir, CUDA)
    prefill = StageBatch([0, 1], [0, 0], [9, 5], [[1, 2, 3], [4, 5]], torch.arange(14))
    decode = StageBatch([0, 1], [9, 5], [1, 1], [[1, 2, 3], [4, 5]], torch.tensor([7, 8]))
    chunk = StageBatch([0], [9], [3], [[1, 2, 3]], torch.tensor([1, 2, 3]))
    for batch in (prefill, decode, chunk):  # warm: kernels loaded, allocator grown
        executor.execute(batch)
    syncs: list[str] = []
    for batch in (prefill, decode, chunk):
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                executor.execute(batch)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        syncs += [f"{batch.num_new}: {w.message}" for w in caught]
    assert syncs == []


def test_the_kv_cache_is_sized_from_free_device_memory(model_dir: Path) -> None:
    engine = LLMEngine.from_model_dir(model_dir, max_batch=8, device="cuda")
    assert engine.startup is not None
    report = engine.startup.kv_sizing
    print(report)
    assert report is not None and report.method == "cuda-peak"
    engine.add_request(request("a", PROMPTS[0], greedy(8)))
    assert len(token_ids(drain(engine)["a"])) == 8


def test_sampling_on_the_gpu_draws_what_it_draws_on_the_cpu() -> None:
    logits = torch.randn(32, 4096, generator=torch.Generator().manual_seed(3)) * 2
    settings = [dict(temperature=0.8), dict(temperature=1.0, top_k=40),
                dict(temperature=0.7, top_p=0.9), dict(temperature=0.0)]  # fmt: skip

    def states() -> list[SamplerState]:
        return [
            SamplerState.from_params(SamplingParams(seed=i, **settings[i % 4]))  # type: ignore[arg-type]
            for i in range(32)
        ]

    same = 0
    for _ in range(10):
        cpu, gpu = sample(logits, states()), sample(logits.to(CUDA), states())
        same += sum(a == b for a, b in zip(cpu, gpu, strict=True))
    assert same >= 0.98 * 320  # a draw on a running-sum boundary may round the other way
