"""The pipeline protocol's frames (one discriminated union, see transport.frames).

A pipeline is a head (the process with the engine, running layers [0, a)) and stages
1..n, each in its own process. Two conversations run over separate connections:

control (head ↔ every stage; `Attach` opens it)
    head → stage   attach{session, stage, model, cache, downstream}
    stage → head   attached{layers}   or   failed{error}      (the reply)
    stage → head   result{step, tensor} + tensor bytes         (last stage only)
    stage → head   failed{stage, step, error}                  (at any time)
    head → stage   heartbeat{}  every HEARTBEAT_S                 (the head lives)
    head → stage   detach{}   stage → head  detach{}          (the session ends; ack)

data (each hop of the chain: head → stage 1 → stage 2 → ... ; `Feed` opens it)
    upstream → downstream   feed{session, stage}   (once: whose work this is)
    upstream → downstream   work{step, batch, tensor} + tensor bytes, in step order

A head that dies with its network (a node lost, a pod's network torn down before its
close reached the wire) leaves its stages a connection that never reports an error: a
stage ends a session whose head has been silent for HEAD_SILENCE_S, so it does not stay
a stage of a head that is gone.

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

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from cascade_protocol import limits
from cascade_protocol.peer_auth import PeerProof
from cascade_worker.engine.config import ModelConfig
from cascade_worker.transport.frames import FrameCodec

# Chunk size of every tensor on the wire (both ends cut a tensor into the same chunks).
CHUNK_BYTES = 1 << 20
# The head's heartbeat on every control connection, and how long a stage waits for one
# (five missed) before it ends the session: a silent head is a dead head.
HEARTBEAT_S = 2.0
HEAD_SILENCE_S = 10.0
# torch dtype names a tensor may travel as, with their sizes.
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4}
# Static ceilings (the receiver checks the real, model-dependent bounds: bounds.py).
# A tensor announced by a frame is allocated before its bytes arrive: the largest real
# one is a max batch (4096) of float32 logits over a 152k vocabulary, 2.5 GB.
MAX_TENSOR_BYTES = 1 << 32
MAX_TENSOR_DIMS = 4
MAX_BLOCK_SIZE = 1024  # token positions per KV block (the engine's default is 16)
# KV positions of one cache: a max batch of full contexts.
MAX_KV_TOKENS = limits.MAX_BATCH * limits.MAX_CONTEXT_TOKENS
Count = Annotated[int, Field(ge=0, le=limits.MAX_CONTEXT_TOKENS)]  # positions, tokens, block ids


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
    shape: tuple[Annotated[int, Field(ge=0)], ...] = Field(max_length=MAX_TENSOR_DIMS)

    @model_validator(mode="after")
    def _bounded(self) -> TensorSpec:
        if self.nbytes > MAX_TENSOR_BYTES:
            raise ValueError(
                f"shape {list(self.shape)} of {self.dtype} is {self.nbytes} bytes, more than "
                f"the {MAX_TENSOR_BYTES} a tensor may have"
            )
        return self

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]


# BatchMeta.extra key: the layer a stage starts this micro-batch at, when a cooperating
# head ran more than the stage's first layers' worth (pipeline/cooperative.py).
FROM_LAYER = "from_layer"


class BatchMeta(_Frame):
    """A `StageBatch` without its tensor (mirrors `StageBatch.meta()`)."""

    seq_ids: list[int] = Field(max_length=limits.MAX_BATCH)
    # tokens already in each sequence's cache
    start_positions: list[Count] = Field(max_length=limits.MAX_BATCH)
    num_new: list[Count] = Field(max_length=limits.MAX_BATCH)  # new tokens of each this step
    # Block ids the head's scheduler gave each sequence: every stage indexes its own
    # cache with them, so no stage keeps scheduling state (and none is told to free).
    block_tables: list[list[Count]] = Field(max_length=limits.MAX_BATCH)
    all_logits: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)


class Attach(_Frame):
    kind: Literal["attach"] = "attach"
    session: str  # the head's pipeline id; work of any other session is refused
    stage: int = Field(ge=1)  # position in the chain (the head is 0)
    model: str  # fingerprint of the head's ModelConfig; another model is refused
    # The paged-cache geometry the head's scheduler allocates block ids from; the stage
    # allocates a KV cache of this size (bounded here, and by the model in bounds.py).
    block_size: int = Field(ge=1, le=MAX_BLOCK_SIZE)
    num_blocks: int = Field(ge=1, le=MAX_KV_TOKENS)
    # The next stage's address; None: this stage is the last, results go to the head.
    downstream: str | None = None
    proof: PeerProof | None = None  # the deployment's peer token (peer_auth), for the session


class Attached(_Frame):
    kind: Literal["attached"] = "attached"
    session: str
    stage: int
    layers: tuple[int, int]  # what this stage runs; the head checks the chain is contiguous


class Feed(_Frame):
    kind: Literal["feed"] = "feed"
    session: str
    stage: int  # the sender's position (0: the head)
    proof: PeerProof | None = None


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


class Heartbeat(_Frame):
    kind: Literal["heartbeat"] = "heartbeat"


class Detach(_Frame):
    kind: Literal["detach"] = "detach"


PipelineFrame = Attach | Attached | Feed | Work | Result | Failed | Heartbeat | Detach
CODEC: FrameCodec[PipelineFrame] = FrameCodec(
    TypeAdapter(Annotated[PipelineFrame, Field(discriminator="kind")])
)
