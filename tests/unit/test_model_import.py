"""`cascade model import`'s refusals and its one layout change, on small GGUFs written
here with the `gguf` package (the real model's conversion: test_real_model.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cascade_cli.main import main
from cascade_worker.checkpoints.gguf_import import hf_name, import_gguf, unpermute_rows

gguf = pytest.importorskip("gguf")


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf `permute` (what the import undoes)."""
    return (
        w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def test_unpermute_undoes_llama_cpp_permute() -> None:
    w = np.arange(12 * 4, dtype=np.float32).reshape(12, 4)  # 3 heads of 4 rows
    assert np.array_equal(unpermute_rows(permute(w, 3), 3), w)
    assert not np.array_equal(permute(w, 3), w)


def write(path: Path, arch: str = "llama", tokenizer: str = "gpt2", **extra: object) -> Path:
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(8)
    writer.add_feed_forward_length(16)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model(tokenizer)
    writer.add_token_list(["a", "b", "ab"])
    writer.add_token_merges(["a b"])
    for key, value in extra.items():
        writer.add_string(key, str(value))
    writer.add_tensor("token_embd.weight", np.zeros((3, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"arch": "qwen3"}, "general.architecture"),
        ({"tokenizer": "llama"}, "tokenizer.ggml.model"),
        ({"tokenizer.ggml.pre": "deepseek-llm"}, "tokenizer.ggml.pre"),
        ({"llama.rope.scaling.type": "yarn"}, "rope.scaling.type"),
    ],
)
def test_what_cannot_be_converted_exactly_is_refused_naming_the_key(
    tmp_path: Path, kwargs: dict[str, str], named: str
) -> None:
    source = write(tmp_path / "m.gguf", **kwargs)
    with pytest.raises(ValueError, match=named):
        import_gguf(tmp_path / "out", source)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_the_cli_names_a_file_that_is_not_a_gguf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"not a gguf at all")
    assert main(["model", "import", str(tmp_path / "out"), "--gguf", str(bad)]) != 0
    assert "x.gguf" in capsys.readouterr().err
    assert main(["model", "import", str(tmp_path / "out"), "--gguf", str(tmp_path / "no")]) != 0


def test_tensor_names_map_to_hf_or_are_refused() -> None:
    assert hf_name("blk.3.attn_q.weight") == "model.layers.3.self_attn.q_proj.weight"
    assert hf_name("output_norm.weight") == "model.norm.weight"
    with pytest.raises(ValueError, match=r"blk\.0\.attn_qkv\.weight"):
        hf_name("blk.0.attn_qkv.weight")
