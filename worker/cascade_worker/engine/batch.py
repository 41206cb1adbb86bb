"""StageBatch: what crosses a stage boundary, in-process today, between processes later.

One forward step of a continuously batched model: several sequences, each contributing
`num_new[i]` tokens (a prefill chunk: many; a decode: one) at positions
`start_positions[i]` .. +num_new[i]-1, their tokens flattened sequence after sequence
into `input`. The first stage gets token ids [T]; every later stage gets the previous
stage's hidden states [T, hidden] in the same order. Everything else is plain ints, so
`meta()` is JSON and `from_meta(meta, tensor)` rebuilds the batch on the far side; each
stage derives its own attention indices from the block tables (see kv_blocks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch


@dataclass(frozen=True)
class StageBatch:
    seq_ids: list[int]  # engine-internal sequence ids (logging, matching replies)
    # Positions already in the KV cache, i.e. the position of the first new token.
    start_positions: list[int]
    num_new: list[int]  # new tokens per sequence this step (>= 1)
    # Per sequence, its KV block ids covering positions 0 .. start + num_new - 1.
    block_tables: list[list[int]]
    input: torch.Tensor  # token ids [T] (int64) or hidden states [T, hidden]
    # The last stage returns logits of every new token (parity tests, prompt logprobs)
    # instead of only each sequence's last one.
    all_logits: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # room for pipeline bookkeeping

    def __post_init__(self) -> None:
        n = len(self.seq_ids)
        if not (len(self.start_positions) == len(self.num_new) == len(self.block_tables) == n):
            raise ValueError("seq_ids, start_positions, num_new, block_tables differ in length")
        if n == 0 or min(self.num_new) < 1 or min(self.start_positions) < 0:
            raise ValueError("a batch needs >= 1 sequence, each with >= 1 new token")
        if self.input.shape[0] != self.num_tokens:
            raise ValueError(f"input has {self.input.shape[0]} rows for {self.num_tokens} tokens")

    @property
    def num_tokens(self) -> int:
        return sum(self.num_new)

    @property
    def num_seqs(self) -> int:
        return len(self.seq_ids)

    def with_input(self, tensor: torch.Tensor) -> StageBatch:
        """The same step carrying another stage's input (hidden states)."""
        return replace(self, input=tensor)

    def meta(self) -> dict[str, Any]:
        """Everything but the tensor, JSON-serializable."""
        return {
            "seq_ids": list(self.seq_ids),
            "start_positions": list(self.start_positions),
            "num_new": list(self.num_new),
            "block_tables": [list(t) for t in self.block_tables],
            "all_logits": self.all_logits,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_meta(cls, meta: dict[str, Any], tensor: torch.Tensor) -> StageBatch:
        return cls(
            seq_ids=[int(x) for x in meta["seq_ids"]],
            start_positions=[int(x) for x in meta["start_positions"]],
            num_new=[int(x) for x in meta["num_new"]],
            block_tables=[[int(b) for b in t] for t in meta["block_tables"]],
            input=tensor,
            all_logits=bool(meta.get("all_logits", False)),
            extra=dict(meta.get("extra", {})),
        )
