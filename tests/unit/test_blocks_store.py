"""BlockStore: receive buffers, verified installs, layer-ready callbacks, write-back."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from cascade_worker.blocks.manifest import ModelManifest
from cascade_worker.blocks.safetensors_io import read_header
from cascade_worker.blocks.store import BlockStore, held_run, held_runs
from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec

TINY = ModelSpec(layers=8, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=300)


@pytest.fixture
def source(tmp_path: Path) -> BlockStore:
    write_checkpoint(tmp_path / "src", TINY)
    return BlockStore.from_model_dir(tmp_path / "src", 4)


def _copy(src: BlockStore, dst: BlockStore, index: int) -> bool:
    dst.buffer(index)[:] = src.buffer(index)
    return dst.install(index)


def _tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        out.update(load_file(str(path)))
    return out


def test_source_is_complete(source: BlockStore) -> None:
    assert source.complete() and source.held() == [0, 1, 2, 3] and source.missing() == []
    assert source.model_digest == source.manifest.digest and source.manifest.verify_digest()
    assert sorted(source.installed_at) == [0, 1, 2, 3]
    assert [(b.layer_start, b.layer_end) for b in source.manifest.blocks] == [
        (0, 2), (2, 4), (4, 6), (6, 8)
    ]  # fmt: skip
    assert "tokenizer.json" in source.manifest.extras


def test_receiver_preallocates_and_installs(source: BlockStore) -> None:
    manifest = ModelManifest.model_validate_json(source.manifest.model_dump_json())
    dst = BlockStore(manifest)
    assert dst.held() == [] and dst.missing() == [0, 1, 2, 3] and not dst.complete()
    for i in range(4):
        buf = dst.buffer(i)
        assert buf.dtype == np.uint8 and buf.nbytes == manifest.blocks[i].nbytes
        assert buf.flags.writeable
    assert _copy(source, dst, 2)
    assert dst.has(2) and not dst.has(1) and dst.missing() == [0, 1, 3]
    assert 2 in dst.installed_at and 1 not in dst.installed_at
    for i in (0, 1, 3):
        assert _copy(source, dst, i)
    assert dst.complete()


def test_corrupt_block_not_installed(source: BlockStore, caplog: pytest.LogCaptureFixture) -> None:
    dst = BlockStore(source.manifest)
    seen: list[tuple[int, int]] = []
    dst.on_layers_ready(lambda a, b: seen.append((a, b)))
    dst.buffer(1)[:] = source.buffer(1)
    dst.buffer(1)[-1] ^= 0xFF  # one byte flipped, even a padding byte
    with caplog.at_level(logging.WARNING):
        assert dst.install(1) is False
    assert "block 1 rejected" in caplog.text
    assert not dst.has(1) and 1 not in dst.installed_at and seen == []
    with pytest.raises(ValueError, match="not installed"):
        dst.tensors(1)
    dst.buffer(1)[-1] ^= 0xFF  # re-fetched into the same buffer
    assert dst.install(1) and dst.has(1) and seen == [(2, 4)]


def test_layers_ready_reports_maximal_runs(source: BlockStore) -> None:
    dst = BlockStore(source.manifest)
    seen: list[tuple[int, int]] = []
    dst.on_layers_ready(lambda a, b: seen.append((a, b)))
    for i in (2, 3, 1):
        _copy(source, dst, i)
    assert seen == [(4, 6), (4, 8), (2, 8)]  # blocks 2,3 held, then 1 -> layers of 1..3
    assert _copy(source, dst, 1)  # already held: True, nothing fired
    assert seen == [(4, 6), (4, 8), (2, 8)]
    _copy(source, dst, 0)
    assert seen[-1] == (0, 8)
    assert dst.ready_layers() == [(0, 8)]


def test_layers_ready_late_registration_and_errors(source: BlockStore) -> None:
    dst = BlockStore(source.manifest)
    for i in (0, 2):
        _copy(source, dst, i)
    assert dst.ready_layers() == [(0, 2), (4, 6)]
    seen: list[tuple[int, int]] = []

    def broken(a: int, b: int) -> None:
        raise RuntimeError("engine bug")

    dst.on_layers_ready(broken)
    dst.on_layers_ready(lambda a, b: seen.append((a, b)))
    assert seen == [(0, 2), (4, 6)]  # existing runs replayed at registration
    assert _copy(source, dst, 1)  # the broken callback does not stop the install
    assert seen[-1] == (0, 6) and dst.has(1)


def test_held_runs_pure() -> None:
    assert held_runs(set()) == []
    assert held_runs({0, 1, 3, 5, 6, 7}) == [(0, 1), (3, 3), (5, 7)]
    assert held_run({0, 1, 3, 5, 6, 7}, 6) == (5, 7)
    with pytest.raises(ValueError):
        held_run({1}, 2)


def test_tensors_zero_copy_views(source: BlockStore) -> None:
    views = source.tensors(3)
    buf = source.buffer(3)
    lo, hi = buf.ctypes.data, buf.ctypes.data + buf.nbytes
    assert all(lo <= t.data_ptr() < hi for t in views.values())
    entry = next(t for t in source.manifest.blocks[3].tensors if t.name == "model.norm.weight")
    buf[entry.offset : entry.offset + 2] = 0
    assert float(views["model.norm.weight"][0]) == 0.0


def test_digest_changes_with_any_byte(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "a", TINY)
    base = BlockStore.from_model_dir(tmp_path / "a", 2)
    again = BlockStore.from_model_dir(tmp_path / "a", 2)
    assert base.model_digest == again.model_digest
    assert BlockStore.from_model_dir(tmp_path / "a", 4).model_digest != base.model_digest
    # flip one weight byte in the file: block checksum and digest change
    shard = tmp_path / "a" / "model.safetensors"
    start, header = read_header(shard)
    data = bytearray(shard.read_bytes())
    data[start + header["lm_head.weight"]["data_offsets"][0]] ^= 1  # lm_head: last block
    shard.write_bytes(bytes(data))
    flipped = BlockStore.from_model_dir(tmp_path / "a", 2)
    assert flipped.manifest.blocks[1].checksum != base.manifest.blocks[1].checksum
    assert flipped.manifest.blocks[0].checksum == base.manifest.blocks[0].checksum
    assert flipped.model_digest != base.model_digest
    # a config or extra-file change alone changes the digest too
    other = base.manifest.model_copy(update={"config": {**base.manifest.config, "x": 1}})
    assert not other.verify_digest()
    extras = {**base.manifest.extras, "tokenizer.json": "{}"}
    assert not base.manifest.model_copy(update={"extras": extras}).verify_digest()


def test_from_buffers_verifies(source: BlockStore) -> None:
    buffers = [source.buffer(i).copy() for i in range(4)]
    store = BlockStore.from_buffers(source.manifest, buffers)
    assert store.complete() and store.buffer(0) is buffers[0]  # adopted, not copied
    buffers[2][0] ^= 1
    with pytest.raises(ValueError, match=r"\[2\]"):
        BlockStore.from_buffers(source.manifest, buffers)
    with pytest.raises(ValueError, match="buffers for"):
        BlockStore.from_buffers(source.manifest, buffers[:3])
    with pytest.raises(ValueError, match="uint8 buffer"):
        BlockStore.from_buffers(source.manifest, [*buffers[:3], np.zeros(8, np.uint8)])


def test_index_errors(source: BlockStore) -> None:
    for bad in (-1, 4):
        with pytest.raises(IndexError):
            source.buffer(bad)
        with pytest.raises(IndexError):
            source.install(bad)


def test_write_model_dir_round_trip(tmp_path: Path, source: BlockStore) -> None:
    dst = BlockStore(source.manifest)
    with pytest.raises(ValueError, match="incomplete"):
        dst.write_model_dir(tmp_path / "out")
    for i in (3, 0, 2, 1):
        _copy(source, dst, i)
    dst.write_model_dir(tmp_path / "out")
    expected, got = _tensors(tmp_path / "src"), _tensors(tmp_path / "out")
    assert expected.keys() == got.keys()
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype
        assert torch.equal(got[name].view(torch.uint8), tensor.view(torch.uint8)), name
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "src" / name).read_bytes()
    assert (tmp_path / "out" / "model.safetensors.index.json").exists()
    # and the written directory packs to the very same model digest
    assert BlockStore.from_model_dir(tmp_path / "out", 4).model_digest == source.model_digest
