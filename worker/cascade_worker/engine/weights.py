"""The tensors one stage needs, gathered from packed blocks and cast for compute.

A stage [start, end) needs its decoder layers, plus the embedding when it starts the
model and the final norm and LM head when it ends it. The source is a `BlockStore` (only
the blocks covering those layers must be held; the tensors are zero-copy views, so a
float32 model on CPU costs no extra memory) or a plain dict of HF-named tensors (tests,
checkpoints loaded otherwise). Tensors are converted once, here, to the compute dtype and
device: the forward pass never casts weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.device import torch_device
from cascade_worker.engine.lm_head import LMHead, packs


@dataclass
class LayerWeights:
    input_norm: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    q_bias: torch.Tensor | None
    k_bias: torch.Tensor | None
    v_bias: torch.Tensor | None
    o: torch.Tensor
    post_norm: torch.Tensor
    gate: torch.Tensor
    up: torch.Tensor
    down: torch.Tensor


@dataclass
class StageWeights:
    start: int
    end: int
    layers: list[LayerWeights]  # layers[i] is decoder layer start + i
    embed: torch.Tensor | None  # only when start == 0; maybe the checkpoint's dtype
    norm: torch.Tensor | None  # only when end == num_layers
    lm_head: LMHead | None  # only when end == num_layers


def compute_dtype(config: ModelConfig, device: torch.device) -> torch.dtype:
    """float32 on CPU (fast there, exact parity); on accelerators bfloat16, or float16
    for a float16 checkpoint (its values may not fit bfloat16's mantissa)."""
    if device.type == "cpu":
        return torch.float32
    return torch.float16 if config.dtype == "float16" else torch.bfloat16


def store_tensors(
    store: BlockStore, config: ModelConfig, start: int, end: int
) -> dict[str, torch.Tensor]:
    """HF-named views of every tensor stage [start, end) needs, from the held blocks."""
    manifest = store.manifest
    wanted = {manifest.block_of_layer(layer) for layer in range(start, end)}
    if start == 0 or (end == config.num_layers and config.tie_word_embeddings):
        wanted.add(0)  # embed_tokens (also the LM head when tied)
    if end == config.num_layers:
        wanted.add(len(manifest.blocks) - 1)  # model.norm, lm_head
    missing = [i for i in sorted(wanted) if not store.has(i)]
    if missing:
        raise ValueError(f"layers [{start}, {end}) need blocks {missing}, not held")
    tensors: dict[str, torch.Tensor] = {}
    for index in sorted(wanted):
        tensors.update(store.tensors(index))
    return tensors


def load_stage_weights(
    source: BlockStore | Mapping[str, torch.Tensor],
    config: ModelConfig,
    start: int,
    end: int,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> StageWeights:
    """Weights of layers [start, end) on `device` in `dtype` (default: compute_dtype)."""
    if not 0 <= start < end <= config.num_layers:
        raise ValueError(f"layer range [{start}, {end}) outside 0..{config.num_layers}")
    device = torch_device(device)
    dtype = dtype or compute_dtype(config, device)
    tensors = (
        store_tensors(source, config, start, end) if isinstance(source, BlockStore) else source
    )

    def get(name: str) -> torch.Tensor:
        if name not in tensors:
            raise ValueError(f"checkpoint lacks tensor {name!r}")
        return tensors[name].to(device=device, dtype=dtype)

    def matrix(name: str) -> torch.Tensor:
        """A weight F.linear multiplies by. Where converting copies it anyway (a half-
        precision checkpoint computed in float32 on the CPU), the copy takes the layout
        MKL streams faster at decode sizes, measured one thread, cold cache, 30 layers'
        worth: column-major (x @ W.T reads W.T contiguously) where the matrix widens
        (out >= in: q, o, gate, up), row-major where it narrows (k, v, down). Batch 1:
        gate 10.3 -> 6.7 ms column-major, down 9.3 -> 7.2 ms row-major; batch 16 the
        same way or even. A float32 checkpoint stays a zero-copy view of the blocks."""
        source = tensors.get(name)
        if source is None or device.type != "cpu" or source.dtype == dtype:
            return get(name)
        rows, cols = source.shape
        if rows < cols:
            return get(name)
        out = torch.empty_strided((rows, cols), (1, rows), dtype=dtype, device=device)
        return out.copy_(source)

    def maybe(name: str) -> torch.Tensor | None:
        return get(name) if config.attention_bias else None

    layers = []
    for n in range(start, end):
        p = f"model.layers.{n}."
        a = p + "self_attn."
        layers.append(
            LayerWeights(
                input_norm=get(p + "input_layernorm.weight"),
                q=matrix(a + "q_proj.weight"),
                k=matrix(a + "k_proj.weight"),
                v=matrix(a + "v_proj.weight"),
                q_bias=maybe(a + "q_proj.bias"),
                k_bias=maybe(a + "k_proj.bias"),
                v_bias=maybe(a + "v_proj.bias"),
                o=matrix(a + "o_proj.weight"),
                post_norm=get(p + "post_attention_layernorm.weight"),
                gate=matrix(p + "mlp.gate_proj.weight"),
                up=matrix(p + "mlp.up_proj.weight"),
                down=matrix(p + "mlp.down_proj.weight"),
            )
        )
    last = end == config.num_layers
    head = None
    if last:
        tied = config.tie_word_embeddings
        head = LMHead(get("model.embed_tokens.weight" if tied else "lm_head.weight"))
    return StageWeights(
        start=start,
        end=end,
        layers=layers,
        embed=embedding(tensors, device, dtype) if start == 0 else None,
        norm=get("model.norm.weight") if last else None,
        lm_head=head,
    )


def embedding(
    tensors: Mapping[str, torch.Tensor], device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """The token embedding. Where the LM head is packed (a copy), the embedding stays the
    checkpoint's tensor, a view of the blocks: a lookup reads a few rows, cast after
    (exact: every bfloat16 and float16 value is a float32 one), and a converted copy
    would hold the vocabulary matrix a second time (113 MB for SmolLM2). A float32
    checkpoint's tied head was the embedding itself before; packed, it is one copy."""
    name = "model.embed_tokens.weight"
    if name not in tensors:
        raise ValueError(f"checkpoint lacks tensor {name!r}")
    source = tensors[name]
    if packs(device, dtype) and source.device == device and source.is_floating_point():
        return source
    return source.to(device=device, dtype=dtype)
