"""Compiled execution of a stage's layer range (`torch.compile`, the engine's `compile`).

The compiler sees the dense part of every layer (norms, projections, RoPE, SwiGLU,
residuals) and fuses its elementwise work; the paged part -- writing the step's K/V
into the cache and attending over block tables -- is one opaque custom op, as vLLM does
it: its shapes depend on every sequence's context, which no graph could be reused for.
The op reads the step's `AttentionMeta` from a thread-local set around each call.

Graphs are specialised (`dynamic=False`) on the step's token count, padded up to a
bucket (`token_buckets`: powers of two up to the largest step compiled), so a serving
engine compiles a handful of graphs once, at warm-up, and reuses them; a step larger
than the last bucket runs eager. Padding rows are zeros at position 0: they flow through
the dense layers and are cut before the cache write and after the range. `dynamic=True`
compiles one graph with a symbolic token count instead (no padding, slower kernels);
`cascade bench engine` measures both against eager and transformers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.layers import AttentionMeta
from cascade_worker.engine.stage import StageModel

_STEP = threading.local()  # .stage, .meta: the step the op attends for


@contextmanager
def _stepping(stage: StageModel, meta: AttentionMeta) -> Iterator[None]:
    _STEP.stage, _STEP.meta = stage, meta
    try:
        yield
    finally:
        _STEP.stage = _STEP.meta = None


@torch.library.custom_op("cascade::paged_attention", mutates_args=())
def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int) -> torch.Tensor:
    """Layer `layer` (within the stage) of the current step: cache write + attention
    over the real rows of q [P, H, D] / k, v [P, KVH, D]; padding rows come back zero."""
    stage: StageModel = _STEP.stage
    meta: AttentionMeta = _STEP.meta
    real = meta.slots.shape[0]
    out = stage.attend(meta, layer, q[:real], k[:real], v[:real])
    if real == q.shape[0]:
        return out
    return torch.cat([out, out.new_zeros(q.shape[0] - real, out.shape[1])])


@paged_attention.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int) -> torch.Tensor:
    return q.new_empty(q.shape[0], q.shape[1] * q.shape[2])


def _op_attend(i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.ops.cascade.paged_attention(q, k, v, i)  # type: ignore[no-any-return]


def _own_code(
    stage: StageModel,
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """The stage's layer range as a function with a code object of its own: dynamo keeps
    graphs per code object, so engines sharing one would share (and exhaust) one
    recompile limit, and a dropped engine's graphs -- holding its weights -- would live
    on in the shared code's cache."""

    def run(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
        return stage.run_layers(x, positions, stage.start, stage.end, _op_attend, inv_freq)

    run.__code__ = run.__code__.replace(co_name=f"layers_{stage.start}_{stage.end}")
    return run


def token_buckets(max_tokens: int) -> tuple[int, ...]:
    """Padded step sizes: 1, 2, 4, ... up to the first power of two >= max_tokens."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    return tuple(1 << i for i in range((max_tokens - 1).bit_length() + 1))


class CompiledLayers:
    """A stage's whole range, compiled per token bucket; `fits` says which steps."""

    def __init__(
        self,
        stage: StageModel,
        buckets: tuple[int, ...],
        *,
        dynamic: bool = False,
        backend: str = "inductor",  # "eager": dynamo and the op without codegen (tests)
    ) -> None:
        self.stage = stage
        self.buckets = buckets
        self.dynamic = dynamic
        self.steps = 0  # steps run through a graph (not eager for being too large)
        # One graph per bucket must not trip dynamo's recompile limit (default 8).
        limit = torch._dynamo.config.recompile_limit
        torch._dynamo.config.recompile_limit = max(limit, len(buckets) + 1)
        self._fn = torch.compile(_own_code(stage), dynamic=dynamic, fullgraph=True, backend=backend)

    def fits(self, tokens: int) -> bool:
        return tokens <= self.buckets[-1]

    def __call__(self, x: torch.Tensor, meta: AttentionMeta) -> torch.Tensor:
        """Layers over x [T] ids or [T, hidden]; eager when T exceeds the last bucket."""
        real = x.shape[0]
        if not self.fits(real):
            return self.stage.run_layers(
                x, meta.positions, self.stage.start, self.stage.end,
                lambda i, q, k, v: self.stage.attend(meta, i, q, k, v),
                self.stage.inv_freq(meta.longest),
            )  # fmt: skip
        size = real if self.dynamic else next(b for b in self.buckets if b >= real)
        pad = size - real
        positions = meta.positions
        if pad:
            x = torch.cat([x, x.new_zeros(pad, *x.shape[1:])])
            positions = torch.cat([positions, positions.new_zeros(pad)])
        self.steps += 1
        with _stepping(self.stage, meta):
            out: torch.Tensor = self._fn(x, positions, self.stage.inv_freq(meta.longest))
        return out[:real]

    def warm_up(self) -> float:
        """Compile every bucket's graph now (not on a request's step); seconds taken.
        Each runs a dummy step of decodes, all in block 0: garbage K/V there is never
        read, since a sequence writes its positions before attending to them."""
        began = time.perf_counter()
        first = self.stage.is_first
        for size in self.buckets[-1:] if self.dynamic else self.buckets:
            if first:
                x = torch.zeros(size, dtype=torch.int64)
            else:
                x = torch.zeros(size, self.stage.config.hidden, dtype=self.stage.dtype)
            batch = StageBatch(
                list(range(size)), [0] * size, [1] * size, [[0]] * size, x.to(self.stage.device)
            )
            self.stage.forward(batch)
        return time.perf_counter() - began


def compile_stage(
    stage: StageModel,
    max_tokens: int,
    *,
    dynamic: bool = False,
    backend: str = "inductor",
    warm_up: bool = True,
) -> float:
    """Give `stage` a compiled path for steps of up to `max_tokens` tokens; returns the
    warm-up (compile) seconds, 0 when `warm_up` is False (graphs compile on first use)."""
    buckets = token_buckets(max_tokens)
    stage.compiled = CompiledLayers(stage, buckets, dynamic=dynamic, backend=backend)
    return stage.compiled.warm_up() if warm_up else 0.0
