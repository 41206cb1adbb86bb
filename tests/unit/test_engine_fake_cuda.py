"""The engine's forward and sampler on a `cuda` device without one: FakeTensorMode gives
every tensor a device and shape but no data, so a weight, KV page or index left on the
host fails the op that mixes it in (FakeTensorDeviceMismatchError), and a host
synchronisation inside a step (`int(tensor)`, `.tolist()`, boolean indexing) fails
because there is no data to read. The checkpoint's host tensors enter as fakes, as real
host memory would, and the engine moves them where it computes."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from engine_harness import checkpoint_tensors, make_model
from torch._subclasses.fake_tensor import FakeTensorMode

from cascade_protocol.generate import SamplingParams
from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.executor import LocalExecutor
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.sampling import SamplerState, sample_on_device

CUDA = torch.device("cuda", 0)
PREFILL = StageBatch([0, 1], [0, 0], [9, 5], [[1, 2, 3], [4, 5]], torch.arange(14))
DECODE = StageBatch([0, 1], [9, 5], [1, 1], [[1, 2, 3], [4, 5]], torch.tensor([7, 8]))
CHUNK = StageBatch([0, 2], [9, 0], [3, 1], [[1, 2, 3], [6]], torch.tensor([1, 2, 3, 4]))


@pytest.fixture(scope="module", params=["llama", "qwen2", "mistral"])
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = make_model(tmp_path_factory.mktemp(request.param), request.param)
    config = ModelConfig.from_hf(BlockStore.from_model_dir(path, 1).manifest.config)
    return config, checkpoint_tensors(path)


def _fake_executor(mode: FakeTensorMode, checkpoint: Any, cuts: tuple[int, ...] = ()) -> Any:
    config, tensors = checkpoint
    fakes = {name: mode.from_tensor(t) for name, t in tensors.items()}
    cache = CacheConfig(block_size=4, num_blocks=16)
    return LocalExecutor.load(fakes, config, cache, cuts=cuts, device="cuda")


def _fake(mode: FakeTensorMode, batch: StageBatch) -> StageBatch:
    """The step's host input as a fake host tensor (the engine copies it to the device)."""
    return batch.with_input(mode.from_tensor(batch.input))


def _on(t: torch.Tensor | None, dtype: torch.dtype) -> bool:
    return t is None or (t.device == CUDA and t.dtype == dtype)


def test_every_weight_and_kv_page_lives_on_the_device(checkpoint: Any) -> None:
    with FakeTensorMode() as mode:
        executor = _fake_executor(mode, checkpoint, cuts=(2,))
        for stage in executor.stages:
            assert stage.dtype == torch.bfloat16  # the CUDA default
            w = stage.weights
            for layer in w.layers:
                for name, t in vars(layer).items():
                    assert _on(t, torch.bfloat16), name
            assert w.embed is None or w.embed.device == CUDA
            assert w.norm is None or _on(w.norm, torch.bfloat16)
            for page in (*stage.cache.k, *stage.cache.v):
                assert _on(page, torch.bfloat16)


def test_steps_run_on_the_device_without_reading_it(checkpoint: Any) -> None:
    config, _ = checkpoint
    with FakeTensorMode() as mode:
        executor = _fake_executor(mode, checkpoint, cuts=(1, 3))
        for batch in (PREFILL, DECODE, CHUNK):
            logits = executor.execute(_fake(mode, batch))
            assert logits.device == CUDA and logits.dtype == torch.float32
            assert tuple(logits.shape) == (batch.num_seqs, config.vocab)


def test_the_sampled_tokens_stay_on_the_device(checkpoint: Any) -> None:
    """Greedy, temperature and top-k rows; top-p's acceptance test reads the device by
    design (sampling.py), once a round."""
    with FakeTensorMode() as mode:
        executor = _fake_executor(mode, checkpoint)
        logits = executor.execute(_fake(mode, PREFILL))
        rows = [SamplingParams(temperature=0.0), SamplingParams(temperature=0.8, top_k=5, seed=1)]
        for params in (rows, [SamplingParams(temperature=0.7, seed=2)] * 2):
            states = [SamplerState.from_params(p) for p in params]
            tokens = sample_on_device(logits, states)
            assert tokens.device == CUDA and tokens.dtype == torch.int64


@pytest.mark.parametrize("misplaced", ["weight", "kv page"])
def test_a_tensor_left_on_the_host_is_caught(checkpoint: Any, misplaced: str) -> None:
    """The check can fail: the same forward with one weight, or one layer's KV pages,
    on the CPU."""
    with FakeTensorMode() as mode:
        stage = _fake_executor(mode, checkpoint).stages[0]
        if misplaced == "weight":
            layer = stage.weights.layers[1]
            layer.up = layer.up.to("cpu")
        else:
            stage.cache.v[1] = stage.cache.v[1].to("cpu")
        with pytest.raises(Exception, match="device"):
            stage.forward(_fake(mode, PREFILL))


def test_a_host_read_inside_a_step_is_caught(
    checkpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """...and so does a forward that reads a device tensor on the host."""
    import cascade_worker.engine.stage as stage_module

    real = stage_module.rms_norm

    def reading(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        int(x.abs().max())  # the kind of bound the attention must take from Python lists
        return real(x, weight, eps)

    monkeypatch.setattr(stage_module, "rms_norm", reading)
    with FakeTensorMode() as mode:
        executor = _fake_executor(mode, checkpoint)
        with pytest.raises(Exception):  # noqa: B017 - whichever error fake data raises
            executor.execute(_fake(mode, DECODE))
