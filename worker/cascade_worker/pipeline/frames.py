"""The pipeline protocol's frames (one discriminated union, see transport.frames).

A pipeline is a head (the process with the engine, running layers [0, a)) and stages
1..n, each in its own process. Two conversations run over separate connections:

control (head ↔ every stage; `Attach` opens it)
    head → stage   attach{session, stage, model, cache, downstream}
    stage → head   attached{layers}   or   failed{error}      (the reply)
    stage → head   result{step, tensor} + tensor bytes         (last stage only)
    stage → head   failed{stage, step, error}                  (at any time)
    head → stage   detach{}   stage → head  detach{}          (the session ends; ack)

data (each hop of the chain: head → stage 1 → stage 2 → ... ; `Feed` opens it)
    upstream → downstream   feed{session, stage}   (once: whose work this is)
    upstream → downstream   work{step, batch, tensor} + tensor bytes, in step order

The last stage has no downstream: its results (logits of each sequence's last new
token) go back to the head on the control connection the head opened, so the head
needs no listener. A tensor follows its frame as chunk messages of `CHUNK_BYTES`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cascade_worker.engine.config import ModelConfig
from cascade_worker.transport.frames import FrameCodec

# Chunk size of every tensor on the wire (both ends cut a tensor into the same chunks).
CHUNK_BYTES = 1 << 20
# torch dtype names a tensor may travel as, with their sizes.
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4}


def model_fingerprint(config: ModelConfig) -> str:
    """A short digest of the model's shape and math, so a head never pipelines its
    batches through a stage of another model (checkpoints of one config.json agree)."""
    doc = json.dumps(dataclasses.asdict(config), sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TensorSpec(_Frame):
    """Shape and dtype of the tensor whose bytes follow a frame."""

    dtype: Literal["float32", "float16", "bfloat16", "int64", "int32"]
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]


# BatchMeta.extra key: the layer a stage starts this micro-batch at, when a cooperating
# head ran more than the stage's first layers' worth (pipeline/cooperative.py).
FROM_LAYER = "from_layer"


class BatchMeta(_Frame):
    """A `StageBatch` without its tensor (mirrors `StageBatch.meta()`)."""

    seq_ids: list[int]
    start_positions: list[int]  # tokens already in each sequence's cache
    num_new: list[int]  # new tokens of each sequence this step
    # Block ids the head's scheduler gave each sequence: every stage indexes its own
    # cache with them, so no stage keeps scheduling state (and none is told to free).
    block_tables: list[list[int]]
    all_logits: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)


class Attach(_Frame):
    kind: Literal["attach"] = "attach"
    session: str  # the head's pipeline id; work of any other session is refused
    stage: int = Field(ge=1)  # position in the chain (the head is 0)
    model: str  # fingerprint of the head's ModelConfig; another model is refused
    # The paged-cache geometry the head's scheduler allocates block ids from.
    block_size: int = Field(ge=1)
    num_blocks: int = Field(ge=1)
    # The next stage's address; None: this stage is the last, results go to the head.
    downstream: str | None = None


class Attached(_Frame):
    kind: Literal["attached"] = "attached"
    session: str
    stage: int
    layers: tuple[int, int]  # what this stage runs; the head checks the chain is contiguous


class Feed(_Frame):
    kind: Literal["feed"] = "feed"
    session: str
    stage: int  # the sender's position (0: the head)


class Work(_Frame):
    kind: Literal["work"] = "work"
    step: int  # micro-batch number, increasing; results are matched by it
    batch: BatchMeta
    tensor: TensorSpec  # hidden states [tokens, hidden]


class Result(_Frame):
    kind: Literal["result"] = "result"
    step: int
    tensor: TensorSpec  # float32 logits [sequences, vocab] ([tokens, vocab]: all_logits)


class Failed(_Frame):
    kind: Literal["failed"] = "failed"
    stage: int  # who reports
    step: int | None = None  # the micro-batch it failed on, if any
    error: str


class Detach(_Frame):
    kind: Literal["detach"] = "detach"


PipelineFrame = Attach | Attached | Feed | Work | Result | Failed | Detach
CODEC: FrameCodec[PipelineFrame] = FrameCodec(
    TypeAdapter(Annotated[PipelineFrame, Field(discriminator="kind")])
)
