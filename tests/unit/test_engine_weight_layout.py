"""The layouts weights.py and lm_head.py choose on the CPU, and that they compute the same."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.lm_head import LMHead, packs
from cascade_worker.engine.weights import load_stage_weights

CONFIG = ModelConfig(
    arch="llama",
    num_layers=2,
    hidden=64,
    heads=4,
    kv_heads=2,
    head_dim=16,
    intermediate=128,
    vocab=300,
    rope_theta=10000.0,
    rms_norm_eps=1e-5,
    max_position_embeddings=128,
    attention_bias=False,
    tie_word_embeddings=True,
    layer_windows=(None, None),
    eos_token_ids=(2,),
    bos_token_id=1,
    dtype="bfloat16",
)


def checkpoint(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    h, i = CONFIG.hidden, CONFIG.intermediate
    kv = CONFIG.kv_heads * CONFIG.head_dim
    shapes = {"model.embed_tokens.weight": (CONFIG.vocab, h), "model.norm.weight": (h,)}
    for n in range(CONFIG.num_layers):
        p = f"model.layers.{n}."
        shapes |= {
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (h, h),
            p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h),
            p + "self_attn.o_proj.weight": (h, h),
            p + "mlp.gate_proj.weight": (i, h),
            p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i),
        }
    return {k: torch.randn(s, generator=g).to(dtype) for k, s in shapes.items()}


def column_major(t: torch.Tensor) -> bool:
    return t.stride() == (1, t.shape[0])


def test_a_converted_matrix_is_column_major_where_it_widens_row_major_where_it_narrows() -> None:
    w = load_stage_weights(checkpoint(torch.bfloat16), CONFIG, 0, 2)
    layer = w.layers[0]
    assert all(column_major(t) for t in (layer.q, layer.o, layer.gate, layer.up))
    assert all(t.is_contiguous() for t in (layer.k, layer.v, layer.down))
    assert all(t.dtype == torch.float32 for t in (layer.q, layer.k, layer.down))


def test_a_float32_checkpoint_stays_views_of_its_tensors() -> None:
    tensors = checkpoint(torch.float32)
    w = load_stage_weights(tensors, CONFIG, 0, 2)
    assert w.layers[1].gate.data_ptr() == tensors["model.layers.1.mlp.gate_proj.weight"].data_ptr()


def test_the_embedding_beside_a_packed_head_is_the_checkpoint_tensor_and_looks_up_exactly() -> None:
    tensors = checkpoint(torch.bfloat16)
    w = load_stage_weights(tensors, CONFIG, 0, 2)
    assert w.lm_head is not None and w.embed is not None
    assert w.lm_head.packed == packs(torch.device("cpu"), torch.float32)
    if w.lm_head.packed:
        assert w.embed.data_ptr() == tensors["model.embed_tokens.weight"].data_ptr()
    ids = torch.tensor([0, 7, 299])
    expected = tensors["model.embed_tokens.weight"].float()[ids]
    assert torch.equal(F.embedding(ids, w.embed).float(), expected)


def test_the_head_computes_the_logits_of_its_weight_packed_or_not() -> None:
    weight = torch.randn(300, 64)
    x = torch.randn(5, 64)
    with torch.inference_mode():
        head = LMHead(weight)
        logits = head(x)
    assert logits.shape == (5, 300) and logits.dtype == torch.float32
    torch.testing.assert_close(logits, F.linear(x, weight), rtol=1e-5, atol=1e-5)
    assert head.nbytes == weight.numel() * 4
    assert (head.tensor() is None) == head.packed


def test_a_half_precision_head_is_not_packed() -> None:
    head = LMHead(torch.randn(300, 64).to(torch.bfloat16))
    assert not head.packed and head.tensor() is not None
