"""`cascade model init` output loads unchanged in transformers (each arch, tiny sizes).

These are the only tests that import transformers (~2 s import, <1 s per model); they are
skipped where transformers is not installed. HF_HUB_OFFLINE makes any hub access fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")

from cascade_cli.main import main  # noqa: E402

TINY = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
        "--intermediate", "128", "--max-positions", "128"]  # fmt: skip
TEXTS = ["Hello, world! This is a test.", "ünïcödé 🙂 and code: def f(x): return x + 1\n"]


@pytest.mark.parametrize(
    ("arch", "dtype", "cls"),
    [
        ("llama", "float16", "LlamaForCausalLM"),
        ("qwen2", "bfloat16", "Qwen2ForCausalLM"),
        ("mistral", "float32", "MistralForCausalLM"),
    ],
)
def test_loads_in_transformers(tmp_path: Path, arch: str, dtype: str, cls: str) -> None:
    out = tmp_path / arch
    argv = ["model", "init", str(out), "--arch", arch, "--dtype", dtype, *TINY]
    assert main([*argv, "--shard-mb", "0.05"]) == 0  # sharded, with an index
    assert (out / "model.safetensors.index.json").exists()

    model, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert type(model).__name__ == cls
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    assert model.dtype == getattr(torch, dtype)
    tok = transformers.AutoTokenizer.from_pretrained(out)
    for text in TEXTS:
        ids = tok(text)["input_ids"]
        assert ids[0] == tok.bos_token_id == model.config.bos_token_id
        assert tok.decode(ids, skip_special_tokens=True) == text
    assert tok.eos_token_id == model.config.eos_token_id and tok.pad_token_id is not None
    assert len(tok) <= model.config.vocab_size

    input_ids = tok(TEXTS[0], return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(input_ids).logits
    assert logits.shape == (1, input_ids.shape[1], model.config.vocab_size)
    assert bool(torch.isfinite(logits).all())
    generated = model.generate(input_ids, max_new_tokens=4, do_sample=False)
    assert generated.shape == (1, input_ids.shape[1] + 4)
