"""partition_layers and tensor-to-block assignment (pure)."""

from __future__ import annotations

import itertools

import pytest

from cascade_worker.blocks.partition import assign_tensors, layer_of, partition_layers


@pytest.mark.parametrize(
    ("layers", "blocks", "expected"),
    [
        (1, 1, [(0, 1)]),
        (4, 1, [(0, 4)]),
        (4, 4, [(0, 1), (1, 2), (2, 3), (3, 4)]),
        (5, 2, [(0, 3), (3, 5)]),
        (10, 3, [(0, 4), (4, 7), (7, 10)]),
        (7, 7, [(i, i + 1) for i in range(7)]),
    ],
)
def test_partition_balanced(layers: int, blocks: int, expected: list[tuple[int, int]]) -> None:
    assert partition_layers(layers, blocks) == expected


@pytest.mark.parametrize("layers", range(1, 40))
def test_partition_covers_contiguously(layers: int) -> None:
    for blocks in range(1, layers + 1):
        ranges = partition_layers(layers, blocks)
        assert len(ranges) == blocks
        assert ranges[0][0] == 0 and ranges[-1][1] == layers
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        sizes = [e - s for s, e in ranges]
        assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
        assert sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize(("layers", "blocks"), [(4, 5), (4, 0), (4, -1), (0, 1), (-3, 1)])
def test_partition_rejects(layers: int, blocks: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        partition_layers(layers, blocks)


def test_layer_of() -> None:
    assert layer_of("model.layers.12.mlp.up_proj.weight") == 12
    assert layer_of("model.embed_tokens.weight") is None
    assert layer_of("lm_head.weight") is None
    assert layer_of("model.norm.weight") is None


def test_assign_tensors_forward_order() -> None:
    names = [
        "lm_head.weight",
        "model.layers.2.mlp.up_proj.weight",
        "model.norm.weight",
        "model.layers.10.input_layernorm.weight",
        "model.layers.0.self_attn.q_proj.weight",
        "model.embed_tokens.weight",
        "model.layers.1.self_attn.q_proj.weight",
    ]
    groups = assign_tensors(names, partition_layers(11, 2))
    assert groups[0] == [
        "model.embed_tokens.weight",
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.self_attn.q_proj.weight",
        "model.layers.2.mlp.up_proj.weight",
    ]
    assert groups[1] == [
        "model.layers.10.input_layernorm.weight",
        "model.norm.weight",
        "lm_head.weight",
    ]


def test_single_block_gets_everything() -> None:
    names = ["model.embed_tokens.weight", "model.layers.0.x.weight", "lm_head.weight"]
    assert assign_tensors(names, [(0, 1)]) == [names]


def test_assign_rejects_layer_out_of_range() -> None:
    with pytest.raises(ValueError, match="layer 5"):
        assign_tensors(["model.layers.5.x.weight"], partition_layers(4, 2))
