"""Which layers, and so which tensors, go into which block (pure).

A model of L decoder layers is cut into b blocks of consecutive layers whose sizes differ
by at most one (the first blocks take the extra layers). Tensors outside the decoder
layers follow the pipeline order a forward pass needs: the token embedding belongs to the
first block, everything after the last layer (final norm, LM head) to the last block, so
a node holding blocks 0..k can run layers 0..(end of k) without anything else.
"""

from __future__ import annotations

import re

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
# Names that precede the decoder layers (go with block 0); everything else that is not
# a layer follows them (goes with the last block).
_PRE = ("model.embed_tokens.", "embed_tokens.", "transformer.wte.")


def partition_layers(num_layers: int, blocks: int) -> list[tuple[int, int]]:
    """Split layers 0..num_layers-1 into `blocks` half-open ranges [start, end).

    Balanced: sizes differ by at most one, larger blocks first. Requires
    1 <= blocks <= num_layers.
    """
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    if not 1 <= blocks <= num_layers:
        raise ValueError(f"blocks must be between 1 and num_layers={num_layers}, got {blocks}")
    base, extra = divmod(num_layers, blocks)
    ranges: list[tuple[int, int]] = []
    start = 0
    for i in range(blocks):
        end = start + base + (1 if i < extra else 0)
        ranges.append((start, end))
        start = end
    return ranges


def layer_of(name: str) -> int | None:
    """Decoder layer index in a parameter name, or None for non-layer tensors."""
    match = _LAYER.search(name)
    return int(match.group(1)) if match else None


def is_pre_layer(name: str) -> bool:
    """True for tensors used before the first decoder layer (token embeddings)."""
    return name.startswith(_PRE)


def assign_tensors(names: list[str], ranges: list[tuple[int, int]]) -> list[list[str]]:
    """Group tensor names per block, in a deterministic forward-pass order.

    Within a block: pre-layer tensors, then layers ascending (names sorted within a
    layer), then post-layer tensors. A layer index outside all ranges is a ValueError.
    """
    num_layers = ranges[-1][1]
    groups: list[list[tuple[tuple[int, int, str], str]]] = [[] for _ in ranges]
    for name in names:
        layer = layer_of(name)
        if layer is None:
            if is_pre_layer(name):
                groups[0].append(((0, 0, name), name))
            else:
                # final norm before the LM head, the order a forward pass uses them
                groups[-1].append(((2, 0 if "norm" in name else 1, name), name))
            continue
        if not 0 <= layer < num_layers:
            raise ValueError(f"tensor {name!r} names layer {layer}, model has {num_layers}")
        block = next(i for i, (s, e) in enumerate(ranges) if s <= layer < e)
        groups[block].append(((1, layer, name), name))
    return [[name for _, name in sorted(group)] for group in groups]
