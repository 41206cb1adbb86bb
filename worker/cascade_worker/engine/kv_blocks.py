"""KV-cache capacity as fixed-size token blocks: who holds which (pure, no torch).

The KV cache is paged (vLLM style): every stage's cache is `num_blocks` blocks of
`block_size` token positions, and a sequence holds a list of block ids (its block table)
covering its positions so far. The scheduler owns this allocator, so admission and
preemption are decided from integers alone; the block tables travel inside each
`StageBatch`, which lets every stage -- in this process or another -- index its own
cache tensors identically without knowing any scheduling state.
"""

from __future__ import annotations

from dataclasses import dataclass


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks needed to hold `tokens` positions."""
    return -(-tokens // block_size)


@dataclass(frozen=True)
class CacheConfig:
    block_size: int  # token positions per block
    num_blocks: int  # blocks per stage cache (each layer has this many)

    def __post_init__(self) -> None:
        if self.block_size < 1 or self.num_blocks < 1:
            raise ValueError(f"block_size and num_blocks must be >= 1, got {self}")

    @property
    def capacity_tokens(self) -> int:
        return self.block_size * self.num_blocks


class BlockAllocator:
    """A free list of block ids and each sequence's block table."""

    def __init__(self, config: CacheConfig) -> None:
        self.config = config
        # Pop from the end: low ids are handed out first, which keeps tests readable.
        self._free = list(range(config.num_blocks - 1, -1, -1))
        self._tables: dict[int, list[int]] = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of blocks held by sequences."""
        return 1.0 - len(self._free) / self.config.num_blocks

    def table(self, seq_id: int) -> list[int]:
        return self._tables.get(seq_id, [])

    def extra_blocks(self, seq_id: int, tokens: int) -> int:
        """Blocks `seq_id` must still get to hold `tokens` positions."""
        return max(0, blocks_for(tokens, self.config.block_size) - len(self.table(seq_id)))

    def can_grow(self, seq_id: int, tokens: int) -> bool:
        return self.extra_blocks(seq_id, tokens) <= len(self._free)

    def grow(self, seq_id: int, tokens: int) -> bool:
        """Extend `seq_id`'s table to cover `tokens` positions; False (no change) if full."""
        need = self.extra_blocks(seq_id, tokens)
        if need > len(self._free):
            return False
        table = self._tables.setdefault(seq_id, [])
        for _ in range(need):
            table.append(self._free.pop())
        return True

    def free(self, seq_id: int) -> None:
        """Give back all of `seq_id`'s blocks (no-op if it holds none)."""
        self._free.extend(reversed(self._tables.pop(seq_id, [])))
