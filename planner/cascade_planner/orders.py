"""λScale's k-way circular-shift block orders (Algorithm 1 of the λScale paper).

The b blocks are cut into k contiguous groups of l = ⌈b/k⌉ blocks; sub-group i sends
the groups starting at group i and wrapping around. At any moment the k sub-groups hold
different parts of the model, so receivers from different sub-groups can form an
execution pipeline that covers the whole model after about b/k steps, long before any
single receiver has every block.
"""

from __future__ import annotations

import math


def circular_shift_orders(num_blocks: int, k: int) -> list[list[int]]:
    """k block orders over range(num_blocks); order i starts at block i·⌈b/k⌉."""
    if num_blocks < 0:
        raise ValueError("num_blocks must be >= 0")
    if k < 1:
        raise ValueError("k must be >= 1")
    if num_blocks == 0:
        return [[] for _ in range(k)]
    size = math.ceil(num_blocks / k)
    groups = [list(range(size * i, min(size * (i + 1), num_blocks))) for i in range(k)]
    return [[b for j in range(k) for b in groups[(i + j) % k]] for i in range(k)]
