"""The last stage's vocabulary projection, in the layout the device multiplies fastest.

On the CPU in float32 the LM head is the largest matrix a step reads (SmolLM2: 49,152 x
576, 113 MB, a fifth of the model), and MKL's GEMM streams it poorly at decode batch
sizes: one thread, cold cache, batch 16 took 27-31 ms against 23 ms for oneDNN's
prepacked weight (batch 64: 68-71 vs 63 ms; batch 1: 5.5 vs 9.3 ms, the one size it
loses). So on the CPU the head is packed once for oneDNN (`to_mkldnn`); elsewhere it
stays a plain tensor for `F.linear`. Packing copies the matrix, so the embedding it is
tied to stays a view of the checkpoint (weights.py) rather than a second copy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def packs(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether a head on this device in this dtype is packed for oneDNN."""
    mkldnn = bool(torch.backends.mkldnn.is_available())  # type: ignore[no-untyped-call]
    return device.type == "cpu" and dtype == torch.float32 and mkldnn


class LMHead:
    def __init__(self, weight: torch.Tensor) -> None:
        """`weight` [vocab, hidden], already on its device in the compute dtype."""
        self.packed = packs(weight.device, weight.dtype)
        self.weight = weight.contiguous().to_mkldnn() if self.packed else weight

    @property
    def nbytes(self) -> int:
        return self.weight.numel() * self.weight.element_size()

    def tensor(self) -> torch.Tensor | None:
        """The dense weight (shared with a tied embedding on a GPU); None when packed."""
        return None if self.packed else self.weight

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Logits [n, vocab] in the compute dtype for hidden states x [n, hidden]."""
        if not self.packed:
            return F.linear(x, self.weight)
        return torch._C._nn.mkldnn_linear(x.contiguous().to_mkldnn(), self.weight, None).to_dense()
