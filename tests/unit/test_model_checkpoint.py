"""Writing random-weight checkpoints and the local tokenizer (no transformers needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from engine_harness import checkpoint_tensors
from safetensors.torch import load_file
from tokenizers import Tokenizer

from cascade_worker.checkpoints.checkpoint import plan_shards, write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec, param_shapes
from cascade_worker.checkpoints.tokenizer import MIN_VOCAB, build_tokenizer, special_ids

TINY = ModelSpec(layers=2, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=300)


def test_files_and_values(tmp_path: Path) -> None:
    info = write_checkpoint(tmp_path, ModelSpec(**{**TINY.__dict__, "dtype": "bfloat16"}))
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    }
    tensors = checkpoint_tensors(tmp_path)
    assert set(tensors) == {n for n, _ in param_shapes(info.spec)}
    assert all(t.dtype == torch.bfloat16 for t in tensors.values())
    assert torch.equal(tensors["model.norm.weight"], torch.ones(32, dtype=torch.bfloat16))
    q = tensors["model.layers.0.self_attn.q_proj.weight"].float()
    assert 0.01 < float(q.std()) < 0.03 and bool(torch.isfinite(q).all())
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["vocab_size"] >= info.tokenizer_vocab == 300


def test_sharded_with_index(tmp_path: Path) -> None:
    info = write_checkpoint(tmp_path, TINY, shard_mb=0.02)
    assert (
        len(info.files) > 2 and info.files[0] == f"model-00001-of-{len(info.files):05d}.safetensors"
    )
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    tensors = checkpoint_tensors(tmp_path)
    assert set(index["weight_map"]) == set(tensors)
    assert index["metadata"]["total_size"] == info.tensor_bytes
    assert info.tensor_bytes == sum(t.numel() * t.element_size() for t in tensors.values())
    for name, file_name in index["weight_map"].items():
        assert name in load_file(str(tmp_path / file_name))


def test_seed_determinism_and_force(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "a", TINY)
    write_checkpoint(tmp_path / "b", TINY)
    write_checkpoint(tmp_path / "c", ModelSpec(**{**TINY.__dict__, "seed": 1}))
    a = (tmp_path / "a" / "model.safetensors").read_bytes()
    assert a == (tmp_path / "b" / "model.safetensors").read_bytes()
    assert a != (tmp_path / "c" / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match="--force"):
        write_checkpoint(tmp_path / "a", TINY, shard_mb=0.02)
    write_checkpoint(tmp_path / "a", TINY, shard_mb=0.02, force=True)
    assert not (tmp_path / "a" / "model.safetensors").exists()  # stale single file removed


def test_plan_shards() -> None:
    shapes = [("a", (10,)), ("b", (10,)), ("c", (30,)), ("d", (1,))]
    assert plan_shards(shapes, 1, 20) == [["a", "b"], ["c"], ["d"]]
    assert plan_shards(shapes, 1, 1000) == [["a", "b", "c", "d"]]


def test_tokenizer_round_trip_and_specials(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, TINY)
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert special_ids(tok) == {"unk": 0, "bos": 1, "eos": 2, "pad": 3}
    for text in [
        "Hello, world!",
        "  spaces\tand\nnewlines ",
        "ünïcödé 🙂 漢字",
        "def f(x): return x",
    ]:
        enc = tok.encode(text)
        assert enc.ids[0] == 1  # <s> prepended
        assert tok.decode(enc.ids, skip_special_tokens=True) == text
    assert build_tokenizer().to_str() == build_tokenizer().to_str()  # deterministic
    with pytest.raises(ValueError, match="vocab"):
        build_tokenizer(MIN_VOCAB - 1)
