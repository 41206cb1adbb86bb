"""Packing checkpoints into aligned block buffers and viewing them back without copies."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_harness import checkpoint_tensors
from safetensors.torch import load_file, save_file

from cascade_worker.blocks.manifest import ALIGNMENT, DTYPES
from cascade_worker.blocks.pack import layout, pack_model, unpack_block
from cascade_worker.blocks.safetensors_io import open_model, write_safetensors
from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec

TINY = ModelSpec(layers=3, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=300)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("blocks", [1, 2, 3])
def test_round_trip_exact(tmp_path: Path, dtype: str, arch: str, blocks: int) -> None:
    spec = ModelSpec(**{**TINY.__dict__, "dtype": dtype, "arch": arch})
    write_checkpoint(tmp_path, spec, shard_mb=0.01)  # several shards
    expected = checkpoint_tensors(tmp_path)
    packed = pack_model(tmp_path, blocks)
    got: dict[str, torch.Tensor] = {}
    for block, buf in zip(packed.manifest.blocks, packed.buffers, strict=True):
        got.update(unpack_block(block, buf))
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype == getattr(torch, dtype), name
        assert got[name].shape == tensor.shape
        assert torch.equal(got[name], tensor), name


def test_every_dtype_including_scalars(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(1)
    tensors = {
        f"model.layers.0.{name}": (torch.randn(3, 5, generator=g) * 50).to(getattr(torch, name))
        for name in DTYPES
    }
    tensors["model.layers.1.scalar"] = torch.tensor(3.5, dtype=torch.bfloat16)
    tensors["model.layers.1.empty"] = torch.zeros(0, 7, dtype=torch.float16)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 2}))
    packed = pack_model(tmp_path, 2)
    got = {}
    for block, buf in zip(packed.manifest.blocks, packed.buffers, strict=True):
        got.update(unpack_block(block, buf))
    for name, tensor in tensors.items():
        assert got[name].dtype == tensor.dtype and got[name].shape == tensor.shape
        assert torch.equal(
            got[name].reshape(-1).view(torch.uint8), tensor.reshape(-1).view(torch.uint8)
        )


def test_layout_aligned_and_sized(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, TINY)
    packed = pack_model(tmp_path, 2)
    for block, buf in zip(packed.manifest.blocks, packed.buffers, strict=True):
        assert buf.dtype == np.uint8 and buf.nbytes == block.nbytes
        assert block.nbytes % ALIGNMENT == 0
        end = 0
        for t in block.tensors:
            assert t.offset % ALIGNMENT == 0 and t.offset >= end
            end = t.offset + t.nbytes
        assert end <= block.nbytes
    first, last = packed.manifest.blocks
    assert first.tensors[0].name == "model.embed_tokens.weight"
    assert [t.name for t in last.tensors[-2:]] == ["model.norm.weight", "lm_head.weight"]
    assert (first.layer_start, first.layer_end, last.layer_start, last.layer_end) == (0, 2, 2, 3)


def test_layout_pure() -> None:
    entries, size = layout([("a", "float16", (3,)), ("b", "float32", ()), ("c", "int8", (65,))])
    assert [(e.offset, e.nbytes) for e in entries] == [(0, 6), (64, 4), (128, 65)]
    assert size == 256


def test_unpack_is_zero_copy(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, ModelSpec(**{**TINY.__dict__, "dtype": "bfloat16"}))
    packed = pack_model(tmp_path, 1)
    block, buf = packed.manifest.blocks[0], packed.buffers[0]
    tensors = unpack_block(block, buf)
    lo, hi = buf.ctypes.data, buf.ctypes.data + buf.nbytes
    for entry in block.tensors:
        t = tensors[entry.name]
        assert t.data_ptr() == lo + entry.offset
        assert t.data_ptr() + t.numel() * t.element_size() <= hi
    norm = next(e for e in block.tensors if e.name == "model.norm.weight")
    assert float(tensors["model.norm.weight"][0]) == 1.0
    buf[norm.offset : norm.offset + 2] = np.frombuffer(
        torch.tensor([2.0], dtype=torch.bfloat16).view(torch.uint8).numpy().tobytes(), np.uint8
    )
    assert float(tensors["model.norm.weight"][0]) == 2.0  # the view sees the buffer write
    tensors["model.norm.weight"][1] = 4.0
    assert buf[norm.offset + 2 : norm.offset + 4].tobytes() == (
        torch.tensor([4.0], dtype=torch.bfloat16).view(torch.uint8).numpy().tobytes()
    )


def test_unpack_rejects_wrong_buffer(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, TINY)
    packed = pack_model(tmp_path, 1)
    block = packed.manifest.blocks[0]
    with pytest.raises(ValueError, match="uint8 buffer"):
        unpack_block(block, np.zeros(block.nbytes - 64, dtype=np.uint8))
    with pytest.raises(ValueError, match="uint8 buffer"):
        unpack_block(block, np.zeros(block.nbytes // 4, dtype=np.float32))


def test_safetensors_writer_matches_library(tmp_path: Path) -> None:
    t = {"x": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), "y": torch.ones(1)}
    data = [
        (k, str(v.dtype).removeprefix("torch."), tuple(v.shape), v.view(torch.uint8).numpy())
        for k, v in t.items()
    ]
    write_safetensors(tmp_path / "m.safetensors", data)
    loaded = load_file(str(tmp_path / "m.safetensors"))
    assert all(torch.equal(loaded[k], t[k]) for k in t)
    stored = open_model(tmp_path)
    assert stored["x"].dtype == "bfloat16" and stored["x"].shape == (2, 3)


def test_pack_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="safetensors"):
        (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 2}))
        pack_model(tmp_path, 1)
    (tmp_path / "bad.safetensors").write_bytes(b"\x01")
    with pytest.raises(ValueError, match="too short"):
        pack_model(tmp_path, 1)


def test_more_blocks_than_layers_gives_one_block_per_layer(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, TINY)
    packed = pack_model(tmp_path, 16)  # the deployment default, on a 3-layer model
    ranges = [(b.layer_start, b.layer_end) for b in packed.manifest.blocks]
    assert ranges == [(0, 1), (1, 2), (2, 3)]
